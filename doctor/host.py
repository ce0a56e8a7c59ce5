"""Host: the only door to the outside world.

Probes receive a Host and never touch os.environ, the file system or subprocesses
directly. Tests build one over a temporary root, a fake PATH of scripts that print
real captured output, and a chosen environment (see `Host.for_test`).
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int | None  # None when it never finished (timeout, not found)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""  # "not found", "timed out after 5 s", OSError text
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def command(self) -> str:
        return " ".join(self.argv)


@dataclass
class Host:
    env: Mapping[str, str]
    root: Path = Path("/")
    cwd: Path = field(default_factory=Path.cwd)
    system: str = field(default_factory=platform.system)  # "Linux", "Darwin", "Windows"
    machine: str = field(default_factory=platform.machine)  # "x86_64", "aarch64", "arm64"
    sys_path: Sequence[str] = field(default_factory=lambda: list(sys.path))
    python: str = sys.executable
    glibc: str | None = None  # e.g. "2.36"; None on musl, macOS, Windows

    @classmethod
    def from_system(cls) -> Host:
        glibc = None
        try:
            name = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
            glibc = name.split()[-1] if name.startswith("glibc") else None
        except (AttributeError, ValueError, OSError):
            pass
        return cls(env=dict(os.environ), glibc=glibc)

    @classmethod
    def for_test(cls, root: Path, env: Mapping[str, str] | None = None, **kw) -> Host:
        """A host over `root`; PATH defaults to `root/bin` so only fake commands are seen."""
        env = dict(env or {})
        env.setdefault("PATH", str(root / "bin"))
        env.setdefault("HOME", "/home/user")
        kw.setdefault("cwd", Path("/work"))
        kw.setdefault("system", "Linux")
        kw.setdefault("machine", "x86_64")
        kw.setdefault("sys_path", [])
        kw.setdefault("glibc", "2.36")
        return cls(env=env, root=root, **kw)

    # -- files: paths are as the user sees them; `real` maps them under the root --

    def real(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        if not p.is_absolute():
            p = self.cwd / p
        if self.root == Path("/"):
            return p
        return self.root / p.relative_to(p.anchor)

    def exists(self, path: str | os.PathLike[str]) -> bool:
        return self.real(path).exists()

    def is_dir(self, path: str | os.PathLike[str]) -> bool:
        return self.real(path).is_dir()

    def is_file(self, path: str | os.PathLike[str]) -> bool:
        return self.real(path).is_file()

    def read_text(self, path: str | os.PathLike[str], limit: int = 1 << 20) -> str | None:
        """The file's text (at most `limit` bytes), or None when it cannot be read."""
        try:
            with open(self.real(path), "rb") as fh:
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return None

    def read_bytes(self, path: str | os.PathLike[str], limit: int = 1 << 26) -> bytes | None:
        try:
            with open(self.real(path), "rb") as fh:
                return fh.read(limit)
        except OSError:
            return None

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        try:
            return sorted(os.listdir(self.real(path)))
        except OSError:
            return []

    def access(self, path: str | os.PathLike[str], mode: int) -> bool:
        return os.access(self.real(path), mode)

    def disk_free(self, path: str | os.PathLike[str]) -> int | None:
        """Free bytes on the file system that holds `path` (or its nearest existing parent)."""
        p = self.real(path)
        for candidate in (p, *p.parents):
            if candidate.exists():
                try:
                    return shutil.disk_usage(candidate).free
                except OSError:
                    return None
        return None

    def usable_cpus(self) -> int:
        """CPUs this process may run on (its affinity mask, as taskset and cgroups set it)."""
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1

    # -- environment and commands --

    @property
    def home(self) -> Path:
        return Path(self.env.get("HOME") or self.env.get("USERPROFILE") or "~")

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", ""))

    def run(
        self,
        argv: Sequence[str],
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> RunResult:
        """Run a command with a timeout; never raises. Commands are looked up on the host's PATH."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0] if os.sep in argv[0] else self.which(argv[0])
        if exe is None:
            return RunResult(argv, None, error=f"{argv[0]}: not found on PATH")
        start = time.monotonic()
        real_cwd = self.real(self.cwd)
        try:
            # A new session so a timeout kills the whole group: a hung child's own
            # children would otherwise keep the pipes open and block us past the timeout.
            proc = subprocess.Popen(
                (exe, *argv[1:]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                text=True,
                errors="replace",
                env=dict(env if env is not None else self.env),
                cwd=real_cwd if real_cwd.is_dir() else None,
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            return RunResult(argv, None, error=f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return RunResult(
                argv,
                None,
                out,
                err,
                timed_out=True,
                error=f"{argv[0]} timed out after {timeout:g} s",
                seconds=time.monotonic() - start,
            )
        return RunResult(argv, proc.returncode, out, err, seconds=time.monotonic() - start)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
