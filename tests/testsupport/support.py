"""Helpers the tests import: fake libtorch trees, the torch wheel, the CLI as a subprocess."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

C10_SOURCE = r"""
#include <string>
namespace c10 {
struct Device { explicit Device(const std::string& s); std::string str() const; std::string name; };
Device::Device(const std::string& s) : name(s) {}
std::string Device::str() const { return name; }
std::string version() { return "fake"; }
}
"""


def torch_root() -> Path:
    """The installed torch wheel: a complete libtorch tree (lib, include, share)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("torch is not installed: run scripts/test (it installs torch==2.13.0, the CPU wheel)")
    return Path(list(spec.submodule_search_locations)[0])


def make_tree(
    root: Path,
    version: str | None = "2.8.0",
    variant: str | None = "cpu",
    *,
    abi_line: str | None = None,
    libc10: Path | None = None,
    build_version: bool = True,
    version_h: str | None = None,
    cmake_version: str | None = None,
    cxx_standard: int = 17,
    cuda: bool = False,
) -> Path:
    """A libtorch tree with the version files real releases carry."""
    (root / "include/torch/csrc/api/include/torch").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(parents=True, exist_ok=True)
    (root / "share/cmake/Torch").mkdir(parents=True, exist_ok=True)
    if version and build_version:
        (root / "build-version").write_text(f"{version}+{variant}\n" if variant else f"{version}\n")
    h = version_h or version
    if h:
        major, minor, patch = h.split(".")
        (root / "include/torch/csrc/api/include/torch/version.h").write_text(
            f"#pragma once\n#define TORCH_VERSION_MAJOR {major}\n#define TORCH_VERSION_MINOR {minor}\n"
            f"#define TORCH_VERSION_PATCH {patch}\n"
        )
    cm = cmake_version or version
    if cm:
        (root / "share/cmake/Torch/TorchConfigVersion.cmake").write_text(f'set(PACKAGE_VERSION "{cm}")\n')
    config = f"set_property(TARGET torch PROPERTY\n    CXX_STANDARD {cxx_standard}\n)\n"
    if abi_line is not None:
        config = f'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={abi_line}")\n' + config
    (root / "share/cmake/Torch/TorchConfig.cmake").write_text(config)
    if libc10 is not None:
        shutil.copy(libc10, root / "lib/libc10.so")
    else:
        (root / "lib/libc10.so").write_bytes(b"")
    (root / "lib/libtorch.so").write_bytes(b"")
    if cuda:
        (root / "lib/libtorch_cuda.so").write_bytes(b"")
    return root


def doctor_subprocess(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m doctor ...` as a user runs it, for exit codes."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR", "GITHUB_"))}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    # a fresh folder with no project file, inside the test's own HOME (removed with it, not left in /tmp)
    cwd = cwd or tempfile.mkdtemp(prefix="cwd-", dir=os.environ.get("HOME"))
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=full_env,
                          cwd=cwd, timeout=120)


NOBODY = 65534


def as_another_user(fn):
    """fn() run in a forked child that is not root (as root, `nobody`), its picklable result
    returned: permission checks do not apply to root, and `nobody` cannot start the interpreter
    under a mode-700 /root, so the child keeps this process's imports. fn runs once here first,
    as this user, for the imports it makes on the way (nobody cannot read site-packages there
    either): it must only read. Paths it reads must lie under world-searchable folders
    (world_tmp_dir)."""
    import pickle

    fn()

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            try:
                payload = pickle.dumps(("ok", fn()))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
            with os.fdopen(write, "wb") as out:
                out.write(payload)
        finally:
            os._exit(0)
    os.close(write)
    import select

    chunks = []
    with os.fdopen(read, "rb") as answer:
        deadline = time.monotonic() + 120
        while True:  # a child stuck (say, on a lock held at fork time) fails the test, never hangs it
            ready, _, _ = select.select([answer], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                pytest.fail("as another user: the child did not answer in 120 s")
            chunk = os.read(answer.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    data = b"".join(chunks)
    os.waitpid(pid, 0)
    status, value = pickle.loads(data)
    if status != "ok":
        pytest.fail(f"as another user: {value}")
    return value


def cpu_seconds(fn, budget: float, tries: int = 5) -> tuple[float, object]:
    """The CPU time `fn` takes on this thread, the least of up to `tries` runs (stopping at the first within `budget`),
    and what its last run returned.

    For complexity guards (a pattern gone quadratic), not speed tests: scripts/bench-* measure speed. Backtracking costs
    the same on every run; what inflates one run does not repeat. Thread time, not process time: torch's OpenMP workers,
    left spinning by an earlier test, count in the process's time (CI once measured 47 ms for a 0.3 ms search).
    """
    least, value = float("inf"), None
    for _ in range(tries):
        start = time.thread_time()
        value = fn()
        least = min(least, time.thread_time() - start)
        if least < budget:
            break
    return least, value


def world_tmp_dir(prefix: str) -> Path:
    """A folder under /tmp every user can enter (pytest's tmp_path sits under a mode-700 one);
    the caller removes it."""
    top = Path(tempfile.mkdtemp(prefix=prefix))
    top.chmod(0o755)
    return top


# (major, minor) of Linux's memory devices: mknod'ed inside a test's own folder, so the system's
# /dev/null and /dev/full are never touched, even by a writer that would replace them.
NULL_DEVICE, FULL_DEVICE = (1, 3), (1, 7)


def make_device(path: Path, kind: str, numbers: tuple[int, int] = NULL_DEVICE) -> Path:
    """A real special file at `path`: "char" or "block" (mknod), "fifo" (mkfifo), "socket"
    (bound, then its socket closed: the name stays). Skips the test where this user may not
    make device nodes (not root), or where the file system will not open them (nodev)."""
    import socket
    import stat

    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
    else:
        flag = stat.S_IFCHR if kind == "char" else stat.S_IFBLK
        try:
            os.mknod(path, 0o666 | flag, os.makedev(*numbers))
        except PermissionError:
            pytest.skip("making a device node needs root (CAP_MKNOD)")
        if kind == "char":
            try:
                os.close(os.open(path, os.O_WRONLY))
            except PermissionError:
                pytest.skip(f"{path.parent} is on a file system mounted nodev")
    return path
