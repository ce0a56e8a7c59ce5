"""Threat: tampered content accepted — malformed lock entries, archive entries named like the
doctor's own files, a record written through a symlink, --verify failing on a fresh install."""

from __future__ import annotations

import json
import os

import pytest
from testsupport.fetch_hardening_support import base_args, doctor, libtorch_zip, serve, server  # noqa: F401

from doctor.errors import DoctorError
from doctor.fetch.record import write_new_file

KEY = "2.13.0/linux-x86_64/cpu/cxx11"
NAR = "sha256-" + "A" * 43 + "="


@pytest.mark.parametrize("lock, says", [
    ({"lock_version": 1, "libtorch": {KEY: {"sha256": None, "nar_hash": NAR}}}, f'entry "{KEY}" has sha256 null'),
    ({"lock_version": 1, "libtorch": {KEY: {"sha256": 12, "nar_hash": NAR}}}, f'entry "{KEY}" has sha256 12'),
    ({"lock_version": 1, "libtorch": {KEY: {"sha256": "0" * 64, "nar_hash": None}}}, f'entry "{KEY}" has nar_hash null'),
    ({"lock_version": 1, "libtorch": {KEY: ["sha256", "0" * 64]}}, f'entry "{KEY}" is a list'),
    ({"lock_version": 1, "libtorch": {KEY: {"sha256": "0" * 64, "nar_hash": NAR, "size": "big"}}}, 'has size "big"'),
    ({"lock_version": 1, "libtorch": [KEY]}, '"libtorch" is list'),
    ({"lock_version": "1", "libtorch": {}}, 'lock_version is "1"'),
    ({"lock_version": 0, "libtorch": {}}, "lock_version 0 is not one"),
    ({"lock_version": True, "libtorch": {}}, "lock_version is true"),
    ({"libtorch": {}}, "lock_version is null"),
])
def test_malformed_lock_is_an_error_naming_the_entry_and_is_not_overwritten(server, tmp_path, lock, says):
    serve(server, tmp_path)
    path = tmp_path / "libtorch.lock"
    path.write_text(json.dumps(lock))
    before = path.read_bytes()
    for extra in ((), ("--update-lock",)):
        r = doctor(tmp_path, *base_args(server, tmp_path, None, *extra))
        assert r.exit_code == 1, r.output
        assert says in r.stderr and "hint:" in r.stderr and "matches" not in r.output
        assert path.read_bytes() == before
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("name, mode, data", [
    ("libtorch/torch-doctor.json", 0o100644, b'{"forged": true}'),
    ("libtorch/torch-doctor.json/", 0o40755, b""),
    ("libtorch/torch-doctor.json", 0o120777, b"/etc/passwd"),
    ("libtorch/.ok", 0o100644, b""),
    ("libtorch/.ok", 0o120777, b"lib"),
])
def test_archive_entries_named_like_the_doctors_files_are_refused(server, tmp_path, name, mode, data):
    serve(server, tmp_path, extra=[(name, mode, data)])
    r = doctor(tmp_path, *base_args(server, tmp_path))
    assert r.exit_code == 1, r.output
    assert "named like a file fetch-libtorch writes itself" in r.stderr
    assert not (tmp_path / "dest").exists() and not (tmp_path / "libtorch.lock").exists()


def test_record_and_marker_never_written_through_a_symlink(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious")
    (tmp_path / "torch-doctor.json").symlink_to(target)
    with pytest.raises(DoctorError):
        write_new_file(tmp_path / "torch-doctor.json", b"{}")
    (tmp_path / "dangling").symlink_to(tmp_path / "new-file")
    with pytest.raises(DoctorError):
        write_new_file(tmp_path / "dangling", b"{}")
    assert target.read_text() == "precious" and not (tmp_path / "new-file").exists()


def test_verify_on_a_fresh_install_passes(server, tmp_path):
    # read-only directories, executables, a symlink and an empty dir: all kept as unpacked
    serve(server, tmp_path, extra=[("libtorch/share/ro/", 0o40555, b""), ("libtorch/share/ro/f", 0o100444, b"x")])
    assert doctor(tmp_path, *base_args(server, tmp_path)).exit_code == 0
    r = doctor(tmp_path, *base_args(server, tmp_path, None, "--verify"))
    assert r.exit_code == 0 and "re-hashed, matches its install record" in r.stdout, r.output


def test_verify_failure_speaks_of_the_installed_tree(server, tmp_path):
    serve(server, tmp_path)
    assert doctor(tmp_path, *base_args(server, tmp_path)).exit_code == 0
    (tmp_path / "dest/include/added.h").write_text("// slipped in\n")
    r = doctor(tmp_path, *base_args(server, tmp_path, None, "--verify"))
    assert r.exit_code == 1
    error = r.stderr.split("error:", 1)[1]
    assert f"the installed tree at {tmp_path / 'dest'} has changed" in error and "archive" not in error
    os.unlink(tmp_path / "dest/include/added.h")
