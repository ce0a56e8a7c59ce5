"""Threat: fetch-libtorch --dest deletes a directory the user cares about. It replaces only a
tree it installed itself, or (with --force) a bare libtorch tree; prefixes, conda envs, venvs
and site-packages/torch are refused, naming what was found, and nothing is touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from testsupport.fetch_hardening_support import base_args, doctor, serve, server, tree_listing  # noqa: F401


def libtorch_files(root: Path) -> None:
    (root / "lib").mkdir(parents=True)
    (root / "lib/libc10.so").write_bytes(b"\x7fELF")
    (root / "include/torch").mkdir(parents=True)
    (root / "share/cmake/Torch").mkdir(parents=True)
    (root / "share/cmake/Torch/TorchConfig.cmake").write_text("set(TORCH_FOUND TRUE)\n")


def usr_local(root: Path) -> str:
    libtorch_files(root)  # someone unpacked libtorch into the prefix: still a prefix
    for d in ("bin", "etc", "games", "sbin", "src", "man"):
        (root / d).mkdir()
    (root / "bin/my-tool").write_text("#!/bin/sh\n")
    return "etc"


def dot_local(root: Path) -> str:
    libtorch_files(root)
    (root / "lib/python3.11/site-packages").mkdir(parents=True)
    (root / "state").mkdir()
    return "state"


def conda_env(root: Path) -> str:
    libtorch_files(root)
    (root / "conda-meta").mkdir()
    (root / "conda-meta/history").write_text("# cmd: conda create\n")
    return "conda environment"


def venv_torch(root: Path) -> str:
    libtorch_files(root)  # site-packages/torch has lib/, include/, share/ and much more
    (root / "__init__.py").write_text("# torch\n")
    (root / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (root / "nn").mkdir()
    return "Python package"


@pytest.mark.parametrize("make", [usr_local, dot_local, conda_env, venv_torch])
@pytest.mark.parametrize("force", [False, True])
def test_prefix_like_destination_is_refused_and_untouched(server, tmp_path, make, force):
    serve(server, tmp_path)
    dest = tmp_path / "prefix"
    said = make(dest)
    before = tree_listing(dest)
    r = doctor(tmp_path, *base_args(server, tmp_path, dest, *(["--force"] if force else [])))
    assert r.exit_code == 1, r.output
    assert f"refusing to replace {dest}" in r.stderr and said in r.stderr and "hint:" in r.stderr
    assert tree_listing(dest) == before
    assert server.requests == []  # refused before downloading anything


def test_bare_libtorch_tree_needs_force(server, tmp_path):
    serve(server, tmp_path)
    dest = tmp_path / "dest"
    libtorch_files(dest)
    (dest / "build-version").write_text("2.12.0+cpu\n")
    before = tree_listing(dest)
    r = doctor(tmp_path, *base_args(server, tmp_path, dest))
    assert r.exit_code == 1 and "--force" in r.stderr and tree_listing(dest) == before
    r = doctor(tmp_path, *base_args(server, tmp_path, dest, "--force"))
    assert r.exit_code == 0, r.output
    assert (dest / "torch-doctor.json").is_file() and (dest / "build-version").read_text() == "2.13.0+cpu\n"


def test_doctor_tree_with_a_forged_record_is_not_trusted(server, tmp_path):
    serve(server, tmp_path)
    dest = tmp_path / "dest"
    (dest / "work").mkdir(parents=True)
    (dest / "work/notes.txt").write_text("mine")
    (dest / "torch-doctor.json").write_text('{"version": "2.13.0"}')  # not a record we wrote
    (dest / ".ok").write_text("")
    r = doctor(tmp_path, *base_args(server, tmp_path, dest, "--force"))
    assert r.exit_code == 1 and "refusing to replace" in r.stderr
    assert (dest / "work/notes.txt").read_text() == "mine"


def test_symlinked_destination_is_refused(server, tmp_path):
    serve(server, tmp_path)
    real = tmp_path / "real"
    libtorch_files(real)
    (tmp_path / "dest").symlink_to(real)
    r = doctor(tmp_path, *base_args(server, tmp_path, None, "--force"))
    assert r.exit_code == 1 and "is a symlink" in r.stderr and (real / "lib/libc10.so").exists()


def test_doctor_installed_tree_is_replaced_by_another_version(server, tmp_path):
    serve(server, tmp_path)
    serve(server, tmp_path, name="/cpu/libtorch-shared-with-deps-2.12.0+cpu.zip", version="2.12.0")
    dest = tmp_path / "dest"
    assert doctor(tmp_path, *base_args(server, tmp_path, dest)).exit_code == 0
    args = base_args(server, tmp_path, dest)
    args[args.index("2.13.0")] = "2.12.0"
    r = doctor(tmp_path, *args)
    assert r.exit_code == 0, r.output
    assert (dest / "build-version").read_text() == "2.12.0+cpu\n"
