"""Threat: a name from outside (URL segment after percent-decoding, a variant parsed from a file
name, a zip entry) becomes a path and writes outside the destination."""

from __future__ import annotations

import json
import zipfile

import pytest
from testsupport.fetch_hardening_support import doctor, hermetic_env, libtorch_zip, server, zinfo  # noqa: F401

from doctor.fetch.names import is_safe_component, safe_component


@pytest.mark.parametrize("tail", ["%2Ftmp%2Fdoctor-escape-x", "..%2F..%2Fdoctor-escape-x", "%2E%2E"])
def test_keep_archive_name_from_url_stays_beside_destination(server, tmp_path, tail):
    from urllib.parse import unquote

    data = libtorch_zip(tmp_path / "src.zip").read_bytes()
    server.add("/dl/" + unquote(tail), data)
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    r = doctor(tmp_path, "fetch-libtorch", "--url", server.url("/dl/" + tail), "--allow-http", "--version", "2.13.0",
               "--variant", "cpu", "--dest", str(work / "dest"), "--no-lock", "--keep-archive", "-q")
    assert r.exit_code == 0, r.output
    assert (work / "libtorch.zip").read_bytes() == data  # the safe name, beside the destination
    assert not (tmp_path / "doctor-escape-x").exists() and not (tmp_path / "a/doctor-escape-x").exists()
    assert sorted(p.name for p in work.iterdir()) == [".dest.lock", "dest", "libtorch.zip"]


def test_variant_parsed_from_a_file_name_is_one_plain_name(server, tmp_path):
    name = "/libtorch-shared-with-deps-2.13.0+...zip"  # the naming pattern would give variant ".."
    server.add(name, libtorch_zip(tmp_path / "src.zip").read_bytes())
    env = hermetic_env(tmp_path)
    r = doctor(tmp_path, "fetch-libtorch", "--url", server.url(name.replace("+", "%2B")), "--allow-http",
               "--no-lock", "-q", env=env)
    assert r.exit_code == 2 and "'..' is not a libtorch variant" in r.stderr, r.output
    assert server.requests == [] and not (tmp_path / "home/libtorch").exists()


def test_zip_entry_component_over_255_bytes_is_refused(tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip",
                     extra=[("libtorch/include/" + "a" * 300 + ".h", 0o100644, b"x")])
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "dest"), "--no-lock", "-q")
    assert r.exit_code == 1 and "over 255 bytes" in r.stderr and "hint:" in r.stderr
    assert not (tmp_path / "dest").exists()


def test_zip_entries_climbing_out_are_refused(tmp_path):
    z = tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    libtorch_zip(z)
    with zipfile.ZipFile(z, "a") as zf:
        zf.writestr(zinfo("libtorch/../../escaped", 0o100644), b"x")
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "d/dest"), "--no-lock", "-q")
    assert r.exit_code == 1 and "climbs out of the tree" in r.stderr
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "d/escaped").exists()


@pytest.mark.parametrize("name, ok", [("libtorch.zip", True), ("..", False), (".", False), ("a/b", False),
                                      ("a\\b", False), ("x\ny", False), ("é" * 128, False), ("é" * 127, True), ("", False)])
def test_safe_component(name, ok):
    assert is_safe_component(name) is ok
    assert safe_component(name, "fallback.zip") == (name if ok else "fallback.zip")


def test_lock_keys_are_never_paths(server, tmp_path):
    """A lock file's keys are only looked up, never joined to a path: a hostile key is data."""
    lock = tmp_path / "libtorch.lock"
    nar = "sha256-" + "A" * 43 + "="
    lock.write_text(json.dumps({"lock_version": 1, "libtorch": {"../../evil": {"sha256": "0" * 64, "nar_hash": nar}}}))
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "dest"), "--lock", str(lock), "-q")
    assert r.exit_code == 0, r.output
    assert not (tmp_path.parent / "evil").exists()
    assert set(json.loads(lock.read_text())["libtorch"]) == {"../../evil", "2.13.0/linux-x86_64/cpu/cxx11"}
