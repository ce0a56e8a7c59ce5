"""Shared by tests/hardening/test_fetch_*.py: the fetch tests' real HTTP server and zips, a
hermetic in-process `doctor` runner, and real tmpfs mounts where root allows them."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from testsupport.fetch_helpers import DoctorMain, Server, libtorch_zip, tree_listing, zinfo

__all__ = ["DoctorMain", "Server", "libtorch_zip", "tree_listing", "zinfo", "doctor", "hermetic_env",
           "tmpfs", "server", "serve", "NAME", "base_args"]

NAME = "/cpu/libtorch-shared-with-deps-2.13.0+cpu.zip"


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()


def hermetic_env(tmp_path: Path, **extra) -> dict:
    """The environment changes for one run: own HOME and caches, no LIBTORCH*/DOCTOR_* from
    the machine (None removes a variable under CliRunner)."""
    env: dict = {k: None for k in os.environ if k.startswith(("LIBTORCH", "DOCTOR_")) or k in (
        "Torch_DIR", "CMAKE_PREFIX_PATH", "CONDA_PREFIX")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), LIBTORCH_HOME=str(home / "libtorch"))
    env.update(extra)
    return env


def doctor(tmp_path: Path, *args: str, env: dict | None = None):
    """`doctor ARGS` in process through doctor.cli.main (errors → exit codes), hermetic."""
    return CliRunner().invoke(DoctorMain(), list(args), env=env or hermetic_env(tmp_path), catch_exceptions=False)


def serve(server, tmp_path: Path, name: str = NAME, **kw) -> bytes:
    data = libtorch_zip(tmp_path / f"src-{abs(hash(name)) % 10**8}.zip", **kw).read_bytes()
    server.add(name, data)
    return data


def base_args(server, tmp_path: Path, dest: Path | None = None, *extra: str) -> list[str]:
    return ["fetch-libtorch", "--mirror", server.base, "--allow-http", "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(dest or tmp_path / "dest"), "--lock", str(tmp_path / "libtorch.lock"),
            "--backoff", "0.01", "-q", *extra]


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "4m", inodes: int | None = None):
    """A real tmpfs at `path` (skip with the reason where this machine forbids mounting)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount_ro(path: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True, capture_output=True)
