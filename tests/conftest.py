"""Shared fixtures: a hermetic environment for every test, real ELF libraries of both ABIs
and the real torch wheel."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from testsupport.support import C10_SOURCE, torch_root

# No clock in a property test: hypothesis's default deadline (200 ms an example) and its
# too-slow health check fail on a busy CI machine, not on the code. Speed is scripts/bench-*'s.
settings.register_profile("doctor", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("doctor")

# Variables that point a build (and the doctor) at a libtorch of this machine: a test must
# never see the developer's own, nor write into their caches.
LEAKY_PREFIXES = ("LIBTORCH",)
LEAKY_NAMES = ("Torch_DIR", "CMAKE_PREFIX_PATH", "CONDA_PREFIX", "DOCTOR_LIBTORCH_MIRROR", "DOCTOR_DEBUG_CRASH",
               "SUDO_USER",  # `sudo scripts/test`: every check would note it runs through sudo
               "LD_PRELOAD")  # a developer's jemalloc: every check would judge it


def _isolate(mp: pytest.MonkeyPatch, base: Path) -> None:
    for name in list(os.environ):
        if name.startswith(LEAKY_PREFIXES) or name in LEAKY_NAMES:
            mp.delenv(name)
    home = base / "home"
    (home / ".cache").mkdir(parents=True, exist_ok=True)
    mp.setenv("HOME", str(home))
    mp.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    mp.setenv("LIBTORCH_HOME", str(home / ".cache" / "libtorch"))


@pytest.fixture(scope="session", autouse=True)
def hermetic_session(tmp_path_factory):
    """The same isolation for session- and module-scoped fixtures, which run before any
    function-scoped one (a module's `doctor check --json` report, for instance)."""
    mp = pytest.MonkeyPatch()
    _isolate(mp, tmp_path_factory.mktemp("session-home"))
    # A background job (`scripts/test &`, a non-interactive shell's `&`) starts with SIGINT
    # ignored, every doctor a test starts would inherit that and rightly keep it ignored, and the
    # Ctrl-C tests would see no Ctrl-C: the runner gets the default a terminal gives.
    sigint = signal.getsignal(signal.SIGINT)
    if sigint is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, sigint)
    mp.undo()


@pytest.fixture(autouse=True)
def hermetic(monkeypatch, tmp_path_factory):
    """Every test gets its own HOME, XDG_CACHE_HOME and LIBTORCH_HOME and no LIBTORCH*,
    Torch_DIR, CMAKE_PREFIX_PATH or CONDA_PREFIX of this machine."""
    _isolate(monkeypatch, tmp_path_factory.mktemp("home"))

@pytest.fixture(scope="session")
def wheel_root() -> Path:
    return torch_root()


@pytest.fixture(scope="session")
def abi_libs(tmp_path_factory) -> dict[str, Path]:
    """libc10.so compiled here with -D_GLIBCXX_USE_CXX11_ABI=0 and =1: real ELF files of both ABIs."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.fail("g++ is needed to build the ELF fixtures")
    out = tmp_path_factory.mktemp("elf")
    src = out / "c10.cpp"
    src.write_text(C10_SOURCE)
    libs = {}
    for abi, flag in (("pre-cxx11", "0"), ("cxx11", "1")):
        target = out / abi / "libc10.so"
        target.parent.mkdir()
        subprocess.run([gxx, "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={flag}", "-o", str(target), str(src)], check=True)
        libs[abi] = target
    return libs
