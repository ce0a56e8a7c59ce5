"""Host: the only door to the outside world.

Probes receive a Host and never touch os.environ, the file system or subprocesses
directly. Tests build one over a temporary root, a fake PATH of scripts that print
real captured output, and a chosen environment (see `Host.for_test`).
"""

from __future__ import annotations

import errno
import itertools
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path

from doctor.record import record

DEFAULT_TIMEOUT = 5.0
KILL_GRACE = 5.0  # seconds a killed command gets to die before it is left behind
# What one command may print before the rest is dropped: real nvidia-smi/rocminfo/compiler
# output is a few KiB; a looping tool must not fill the memory.
OUTPUT_LIMIT = 1 << 20
# Seconds `relay` still reads the pipes once the command has exited: a child it left running in the
# background (a compiler server, `sleep 600 &`) may hold them open for as long as it lives.
AFTER_EXIT = 5.0
_ROOT = Path("/")


@record(frozen=True)
class RunResult:
    """A command's outcome: exit status, captured output (capped) and why it failed."""
    argv: tuple[str, ...]
    returncode: int | None  # None when it never finished (timeout, not found)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""  # "not found", "timed out after 5 s", OSError text
    seconds: float = 0.0
    truncated: bool = False  # printed more than the limit; the rest was dropped

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def command(self) -> str:
        return " ".join(self.argv)


@record(frozen=True)
class Relayed:
    """How a command run in the foreground (`Host.relay`) ended, and what it printed: its stdout
    and stderr bytes in the order they arrived, as many as were asked to be kept."""
    argv: tuple[str, ...]
    returncode: int | None  # None when it never finished (timeout, not found)
    output: bytes = b""
    dropped: int = 0  # bytes printed past the bytes kept: passed on, not kept
    timed_out: bool = False
    error: str = ""  # "not found", "timed out after 5 s", OSError text
    spool_error: str = ""  # why the bytes kept stop early: the temporary folder could take no more
    seconds: float = 0.0


@record
class Host:
    """The machine as the probes see it: environment, files and commands, under one root."""
    env: Mapping[str, str]
    root: Path = _ROOT
    cwd: Path = field(default_factory=lambda: _current_dir())
    system: str = field(default_factory=platform.system)  # "Linux", "Darwin", "Windows"
    machine: str = field(default_factory=platform.machine)  # "x86_64", "aarch64", "arm64"
    sys_path: Sequence[str] = field(default_factory=lambda: list(sys.path))
    python: str = sys.executable
    glibc: str | None = None  # e.g. "2.36"; None on musl, macOS, Windows
    output_limit: int = OUTPUT_LIMIT
    # Commands whose output was cut at `output_limit` during this run ("nvidia-smi -q"):
    # `doctor check` reports each as a finding, so a verdict read from a cut output is flagged.
    truncated: list[str] = field(default_factory=list)
    # Answers of `ask` (a command's `--version` and the like), one run per argv per Host: the
    # toolchain and CUDA-toolkit probes both ask nvcc and gcc (issue 19).
    _answers: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _answers_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    # LD_LIBRARY_PATH as the doctor's commands get it (`_pruned_library_path`), per value.
    _library_path: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _library_path_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

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

    def seen_from(self, python: str, sys_path: Sequence[str]) -> Host:
        """This host as another interpreter of it sees it (`check --python`): the same machine, so
        the answers `ask` already has hold for both (the interpreter's own answer is not asked twice)."""
        host = replace(self, python=python, sys_path=sys_path)
        host._answers, host._answers_lock = self._answers, self._answers_lock
        return host

    # -- files: paths are as the user sees them; `real` maps them under the root --

    def real(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        if not p.is_absolute():
            p = self.cwd / p
        if self._real_root():
            return p
        return self.root / p.relative_to(p.anchor)

    def _fs_path(self, path: str | os.PathLike[str]) -> str:
        """`real(path)` as a string, without pathlib for an absolute path on the real root: the
        loader probe asks about thousands of directories of a long LD_LIBRARY_PATH, and check
        about a dozen files in each of dozens of libtorch trees."""
        text = os.fspath(path)
        if isinstance(text, str) and text.startswith("/") and self._real_root():
            return text
        return str(self.real(path))

    def _real_root(self) -> bool:
        # The identity first: Path.__eq__ costs a microsecond, and check maps a few thousand
        # paths (dozens of trees, thousands of LD_LIBRARY_PATH entries).
        return self.root is _ROOT or self.root == _ROOT

    # pathlib's predicates raise on a component over 255 bytes (ENAMETOOLONG) before Python
    # 3.12 swallows it; a path taken from the environment may be anything.
    def exists(self, path: str | os.PathLike[str]) -> bool:
        return _safely(lambda: os.path.exists(self._fs_path(path)))

    def is_dir(self, path: str | os.PathLike[str]) -> bool:
        return _safely(lambda: os.path.isdir(self._fs_path(path)))

    def is_file(self, path: str | os.PathLike[str]) -> bool:
        return _safely(lambda: os.path.isfile(self._fs_path(path)))

    def read_text(self, path: str | os.PathLike[str], limit: int = 1 << 20) -> str | None:
        """The file's text (at most `limit` bytes), or None when it cannot be read or is not a
        regular file."""
        data = self.read_bytes(path, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def read_bytes(self, path: str | os.PathLike[str], limit: int = 1 << 26, pipe: bool = False) -> bytes | None:
        """At most `limit` bytes of a regular file, or None. A FIFO or a device in place of
        libc10.so or version.txt would block or never end: it is opened non-blocking and
        refused after fstat, so reading it never hangs. With `pipe`, a FIFO the user named (a
        log given as `<(make 2>&1)`) is read to its end as `cat` reads it: waiting for a writer."""
        real = self._fs_path(path)
        flags = os.O_RDONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)  # Windows: not text mode
        try:
            # A FIFO the user named is opened blocking from the start, which waits for its writer. Opened
            # non-blocking first, a writer waiting in open() would write and close while the doctor looked,
            # and closing that end to reopen it would drop the text and wait for a writer that never comes.
            fifo = pipe and stat.S_ISFIFO(os.stat(real).st_mode)
            fd = os.open(real, flags if fifo else flags | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError):  # ValueError: a NUL byte in the path
            return None
        try:
            st = os.fstat(fd)
            if not (stat.S_ISFIFO(st.st_mode) if fifo else stat.S_ISREG(st.st_mode)):  # or replaced meanwhile
                return None
            return read_fd(fd, limit, st.st_size)
        except OSError:
            return None
        finally:
            os.close(fd)

    def is_regular(self, path: str | os.PathLike[str]) -> bool:
        """A regular file (after symlinks): not a FIFO, socket or device."""
        try:
            return stat.S_ISREG(os.stat(self._fs_path(path)).st_mode)
        except (OSError, ValueError):
            return False

    def path_kind(self, path: str | os.PathLike[str]) -> str:
        """What a path names, after symlinks, in one word ("directory", "file", "missing", "dangling",
        "loop", "denied", …; diagnose/common.py words them): a message can then say "is a file, not a
        directory" or "is a symbolic link loop" where it used to say "does not exist"."""
        real = self._fs_path(path)
        try:
            mode = os.stat(real).st_mode
        except OSError as exc:
            if exc.errno == errno.ENOENT and os.path.islink(real):  # a link to a removed tree (a Nix GC, a move)
                return "dangling"
            return {errno.ELOOP: "loop", errno.EACCES: "denied", errno.EPERM: "denied",
                    errno.ENAMETOOLONG: "too-long", errno.ENOTDIR: "under-file"}.get(exc.errno, "missing")
        except ValueError:  # a NUL byte
            return "missing"
        if stat.S_ISDIR(mode):
            return "directory"
        if stat.S_ISREG(mode):
            return "file"
        return "fifo" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"

    def listdir(self, path: str | os.PathLike[str]) -> list[str]:
        try:
            return sorted(os.listdir(self._fs_path(path)))
        except (OSError, ValueError):
            return []

    def list_names(self, path: str | os.PathLike[str]) -> list[str] | None:
        """The names in a directory, or None when it cannot be listed (missing, not a directory,
        no read permission): the loader probe tells an empty directory from an unreadable one."""
        try:
            return os.listdir(self._fs_path(path))
        except (OSError, ValueError):
            return None

    def library_dir_listings(self) -> Mapping[str, frozenset[str]]:
        """The names in each LD_LIBRARY_PATH entry, as listed when the doctor's commands got their
        environment (a missing entry or one that is not a directory holds nothing; one that cannot
        be listed is absent): the loader probe need not list them again (issue 19). Empty when the
        path is short or the root is not the real one."""
        pruned = _pruned_library_path(self)
        return {} if pruned is None else pruned[1]

    def access(self, path: str | os.PathLike[str], mode: int) -> bool:
        return _safely(lambda: os.access(self._fs_path(path), mode))

    def _nearest_existing(self, path: str | os.PathLike[str]) -> Path | None:
        """`real(path)`, or its nearest parent that exists: what a folder not made yet will live on."""
        p = self.real(path)
        # parents one by one: a check per tree asks about an existing path, and builds none of them
        return next((c for c in itertools.chain((p,), p.parents) if _safely(c.exists)), None)

    def tilde_expanded(self, value: str) -> str | None:
        """The folder `~` or `~/x` names with ~ expanded to this user's home; None for any other
        value. Only a shell expands ~, and only unquoted at the start of a word: in quotes, Cargo's
        [env], a Dockerfile ENV or GitHub Actions' env: it stays a folder named ~, which tch-rs and
        the loader look for under the current folder; CMake expands it itself."""
        if value != "~" and not value.startswith("~/"):
            return None
        home = self.home
        return str(home / value[2:]) if home.is_absolute() else None

    def disk_free(self, path: str | os.PathLike[str]) -> int | None:
        """Free bytes on the file system that holds `path` (or its nearest existing parent)."""
        where = self._nearest_existing(path)
        try:
            return None if where is None else shutil.disk_usage(where).free
        except OSError:
            return None

    def usable_cpus(self) -> int:
        """CPUs this process may run on (its affinity mask, as taskset and cgroups set it)."""
        if hasattr(os, "sched_getaffinity"):
            return len(os.sched_getaffinity(0))
        return os.cpu_count() or 1

    # -- writes: the same root mapping; an OSError becomes a DoctorError (doctor/writes.py) --

    def write_atomic(self, path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o644,
                     follow: bool = False, doing: str = "write", instead: str = "") -> None:
        """Replace the file at `path` with `data` in one step (temp file beside it, fsync,
        rename); parents are created. `follow`: a symlink there is followed and a named pipe or
        character device written through (a path the user named, as `>` treats it), else a
        symlink is replaced, never written through. A pipe, device or socket is never replaced
        (doctor/writes.py `atomic_write`)."""
        from doctor import writes

        real = self.real(path)
        payload = data.encode("utf-8") if isinstance(data, str) else data
        try:
            writes.mkdirs(real.parent)
            writes.atomic_write(real, payload, mode=mode, follow=follow)
        except (OSError, ValueError) as exc:
            raise _translate(exc, doing, path, instead) from None

    def create_new(self, path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o644,
                   doing: str = "create", instead: str = "") -> None:
        """Create `path` with `data`; never over an existing file or through a symlink at the
        final name (O_EXCL | O_NOFOLLOW). FileExistsError is left to the caller to word."""
        from doctor import writes

        payload = data.encode("utf-8") if isinstance(data, str) else data
        try:
            writes.create_new(self.real(path), payload, mode=mode)
        except FileExistsError:
            raise
        except (OSError, ValueError) as exc:
            raise _translate(exc, doing, path, instead) from None

    def append(self, path: str | os.PathLike[str], data: bytes | str, *, doing: str = "append to",
               instead: str = "") -> None:
        """Append `data` to the regular file at `path` (created when missing)."""
        from doctor import writes

        payload = data.encode("utf-8") if isinstance(data, str) else data
        try:
            writes.append(self.real(path), payload)
        except (OSError, ValueError) as exc:
            raise _translate(exc, doing, path, instead) from None

    def mkdirs(self, path: str | os.PathLike[str], *, instead: str = "") -> None:
        from doctor import writes

        try:
            writes.mkdirs(self.real(path))
        except (OSError, ValueError) as exc:
            raise _translate(exc, "create the folder", path, instead) from None

    def file_size(self, path: str | os.PathLike[str]) -> int:
        from doctor import writes

        return writes.file_size(self.real(path))

    def noexec(self, path: str | os.PathLike[str]) -> bool:
        """Whether `path` (or, before it is made, its nearest existing parent) lies on a file
        system mounted noexec (a hardened /tmp): no program or library there can be mapped."""
        flag = getattr(os, "ST_NOEXEC", 0)
        where = self._nearest_existing(path) if flag else None
        try:
            return bool(where is not None and os.statvfs(where).f_flag & flag)
        except (OSError, ValueError):
            return False

    def temp_dir(self, prefix: str) -> _TempDir:
        """A fresh private folder under $TMPDIR (mapped under the root), removed on exit. The
        context value is the user-visible path; `host.real()` of it is what commands see."""
        import tempfile

        base, real_base = self._temp_base()
        try:
            real = Path(tempfile.mkdtemp(prefix=prefix, dir=real_base))
        except (OSError, ValueError) as exc:
            raise _translate(exc, "create a temporary folder in", base,
                             "point TMPDIR at a writable folder") from None
        return _TempDir(base / real.name, real)

    def temp_file(self):
        """An unnamed, unbuffered read-write binary file under $TMPDIR (mapped under the root), gone
        when closed: each write says how many bytes reached the file."""
        import tempfile

        base, real_base = self._temp_base()
        try:
            return tempfile.TemporaryFile(dir=real_base, buffering=0)
        except (OSError, ValueError) as exc:
            raise _translate(exc, "create a temporary file in", base, "point TMPDIR at a writable folder") from None

    def _temp_base(self) -> tuple[Path, Path]:
        """$TMPDIR as the user sees it and as the file system has it (made under a test root)."""
        import tempfile

        base = Path(self.env.get("TMPDIR") or tempfile.gettempdir()) if self.root == _ROOT else Path("/tmp")
        real_base = self.real(base)
        if self.root != _ROOT:
            try:
                real_base.mkdir(parents=True, exist_ok=True)
            except (OSError, ValueError) as exc:
                raise _translate(exc, "create a temporary folder in", base,
                                 "point TMPDIR at a writable folder") from None
        return base, real_base

    # -- environment and commands --

    @property
    def home(self) -> Path:
        """$HOME, else the user database's home (cron, systemd units and `env -i` leave HOME
        unset); a relative `~` only when neither answers, which callers must not write under:
        `~/.cache/...` would become a folder named `~` in the current directory."""
        home = self.env.get("HOME") or self.env.get("USERPROFILE")
        if home:
            return Path(home)
        if self.root != _ROOT:
            return Path("~")
        try:
            import pwd

            return Path(pwd.getpwuid(os.getuid()).pw_dir or "~")
        except (ImportError, KeyError, OSError):  # Windows; a container's uid absent from /etc/passwd
            return Path("~")

    def musl(self) -> bool:
        """Linux with musl as its C library (Alpine, Void musl, Chimera): no glibc answered, and
        musl's dynamic loader /lib/ld-musl-<arch>.so.1 is there."""
        return (self.system == "Linux" and self.glibc is None
                and any(n.startswith("ld-musl-") for n in self.listdir("/lib")))

    def sudo_user(self) -> tuple[str, Path | None, Path | None] | None:
        """(the user who ran `sudo`, that user's home, root's home) when this process runs as
        root through sudo; None otherwise (homes None where the user database does not say)."""
        user = self.env.get("SUDO_USER")
        if not user or user == "root" or not hasattr(os, "geteuid") or os.geteuid() != 0:
            return None
        import pwd

        def home_of(lookup, key) -> Path | None:
            try:
                return Path(lookup(key).pw_dir)
            except (KeyError, OSError):
                return None

        return user, home_of(pwd.getpwnam, user), home_of(pwd.getpwuid, 0)

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", ""))

    def own_interpreter(self) -> dict | None:
        """What `python -I -c <probe/pyenv.py SCRIPT>` prints, computed in-process when the
        interpreter asked about is the one running the doctor: a second Python costs ~150 ms of
        CPU, the largest single cost of `check` (issue 19). None for any other interpreter or a
        test root. `path` drops what -I drops: the script's directory, PYTHONPATH, user site."""
        if self.root != _ROOT or not self.python or self.python != sys.executable:
            return None
        import importlib.machinery
        import site

        path = list(sys.path)
        if not (sys.flags.isolated or getattr(sys.flags, "safe_path", False)) and path:
            path = path[1:]  # the script's directory (or the cwd for -m / -c)
        dropped = set()
        if not sys.flags.ignore_environment:
            dropped.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        if site.ENABLE_USER_SITE:
            dropped.add(site.getusersitepackages())
        return {"version": platform.python_version(), "implementation": platform.python_implementation(),
                "executable": sys.executable, "realpath": os.path.realpath(sys.executable), "prefix": sys.prefix,
                "base_prefix": sys.base_prefix, "path": [p for p in path if p and p not in dropped],
                "extension_suffixes": importlib.machinery.EXTENSION_SUFFIXES}

    def ask(self, argv: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> RunResult:
        """`run` for a question whose answer cannot change during one doctor run (`nvcc --version`):
        asked once per Host even when several probes ask it at the same time."""
        from concurrent.futures import Future

        key = (tuple(str(a) for a in argv), timeout)
        with self._answers_lock:
            future = self._answers.get(key)
            mine = future is None
            if mine:
                future = self._answers[key] = Future()
        if mine:
            try:
                future.set_result(self.run(argv, timeout=timeout))
            except BaseException as exc:  # the others asking get this error too, not a wait forever
                future.set_exception(exc)
                raise
        # A Ctrl-C or SIGTERM can land in the asker that registered the question before its `try`,
        # leaving the answer unset: the others stop waiting once the run is ending.
        while True:
            try:
                return future.result(timeout=0.1)
            except TimeoutError:
                if _STOPPING:
                    return RunResult(tuple(argv), None, error=f"{argv[0]}: not answered, the run is ending")

    def run(
        self,
        argv: Sequence[str],
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        limit: int | None = None,
    ) -> RunResult:
        """Run a command with a timeout; never raises. Commands are looked up on the host's PATH.
        Each of stdout and stderr keeps at most `limit` bytes (default `output_limit`): its start
        and its end, with a marker between; RunResult.truncated says so."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0] if os.sep in argv[0] else self.which(argv[0])
        if exe is None:
            return RunResult(argv, None, error=f"{argv[0]}: not found on PATH")
        start = time.monotonic()
        proc = self._spawn(argv, exe, subprocess.PIPE if input is not None else subprocess.DEVNULL, env)
        if isinstance(proc, str):
            return RunResult(argv, None, error=proc)
        try:
            return self._collect(proc, argv, start, timeout, input, limit)
        finally:
            _RUNNING.discard(proc)

    def _spawn(self, argv: tuple[str, ...], exe: str, stdin, env: Mapping[str, str] | None = None) -> subprocess.Popen | str:
        """Start a command for `run` or `relay` (stdin: a pipe, /dev/null, or None for the doctor's
        own), its stdout and stderr piped; the reason when it cannot start. The caller discards it
        from _RUNNING once it has ended."""
        real_cwd = self.real(self.cwd)
        try:
            # A new session so a timeout kills the whole group: a hung child's own children would
            # otherwise keep the pipes open and block us past the timeout. It then has no controlling
            # terminal, and a Ctrl-C reaches the doctor, which kills the group.
            proc = subprocess.Popen(
                (exe, *argv[1:]),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=stdin,
                env=dict(env if env is not None else _child_env(self)),
                cwd=real_cwd if _safely(real_cwd.is_dir) else None,
                start_new_session=os.name == "posix",
            )
        except (OSError, ValueError) as exc:
            return f"{argv[0]}: {getattr(exc, 'strerror', None) or exc}"
        _RUNNING.add(proc)
        if _STOPPING:  # the run is ending: a thread that started a command just now must not wait on it
            _kill_group(proc)
        return proc

    def _collect(self, proc: subprocess.Popen, argv: tuple[str, ...], start: float, timeout: float,
                 input: str | None, limit: int | None) -> RunResult:
        cap = self.output_limit if limit is None else limit
        readers = [_Capped(proc.stdout, cap), _Capped(proc.stderr, cap)]
        if input is not None:
            threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True).start()
        # Wait on the pipes, not the process: end of output wakes a reader at once, while
        # Popen.wait(timeout) polls with sleeps of up to 50 ms (issue 19: a dozen commands).
        deadline = start + timeout
        timed_out = False
        try:
            for r in readers:
                r.join(timeout=max(0.0, deadline - time.monotonic()))
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            try:
                proc.wait(timeout=KILL_GRACE)
            except subprocess.TimeoutExpired:  # SIGKILL pending in the kernel: nvidia-smi in D state on a
                # GPU that fell off the bus. It dies when the kernel lets it go; the doctor does not wait.
                return RunResult(argv, None, timed_out=True, seconds=time.monotonic() - start,
                                 error=_timed_out(argv, timeout, died=False))
            for r in readers:  # the group is dead: the pipes close promptly
                r.join(timeout=1.0)
        except BaseException:  # Ctrl-C, SIGTERM in this thread: its own session would let it outlive us
            _kill_group(proc)
            raise
        out, err = (r.text() for r in readers)
        truncated = any(r.dropped for r in readers)
        if truncated:
            self.truncated.append(" ".join(argv))
        if timed_out:
            return RunResult(argv, None, out, err, timed_out=True, error=_timed_out(argv, timeout),
                             seconds=time.monotonic() - start, truncated=truncated)
        return RunResult(argv, proc.returncode, out, err, seconds=time.monotonic() - start, truncated=truncated)

    def relay(self, argv: Sequence[str], timeout: float, out, err, keep: int) -> Relayed:
        """Run a command in the foreground, as `cmd | tee` would run it: it reads the doctor's
        stdin; each byte it writes to stdout or stderr is passed to `out` or `err` (binary streams)
        as it comes; and the first `keep` bytes of both, in the order they arrived, are kept in a
        temporary file (not in memory) and returned. A timeout, Ctrl-C or SIGTERM kills its process
        group as in `run`. Never raises for the command's sake; a temporary file that cannot be
        made is a DoctorError before anything runs."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0] if os.sep in argv[0] else self.which(argv[0])
        if exe is None:
            return Relayed(argv, None, error=f"{argv[0]}: not found on PATH")
        with self.temp_file() as spool:
            start = time.monotonic()
            proc = self._spawn(argv, exe, None)
            if isinstance(proc, str):
                return Relayed(argv, None, error=proc)
            try:
                return self._relayed(proc, argv, start, timeout, _Spool(spool, keep), out, err)
            finally:
                _RUNNING.discard(proc)

    def _relayed(self, proc: subprocess.Popen, argv: tuple[str, ...], start: float, timeout: float,
                 spool: _Spool, out, err) -> Relayed:
        pump = _Pump([proc.stdout, proc.stderr], [out, err], spool)
        deadline = start + timeout
        try:
            ended = _wait_relayed(proc, pump, deadline)
        except BaseException:  # Ctrl-C, SIGTERM: its own session would let it outlive us
            _kill_group(proc)
            raise
        error = ""
        if not ended:
            _kill_group(proc)
            try:
                proc.wait(timeout=KILL_GRACE)
                error = _timed_out(argv, timeout)
            except subprocess.TimeoutExpired:
                error = _timed_out(argv, timeout, died=False)
            pump.join(timeout=1.0)  # what it printed before the kill is passed on and kept
        pump.stop()
        output, dropped, spool_error = spool.read_back()
        return Relayed(argv, proc.returncode if ended else None, output, dropped, timed_out=not ended, error=error,
                       spool_error=spool_error, seconds=time.monotonic() - start)


def _timed_out(argv: tuple[str, ...], timeout: float, died: bool = True) -> str:
    said = f"{argv[0]} timed out after {timeout:g} s"
    # SIGKILL pending in the kernel: nvidia-smi in D state on a GPU that fell off the bus
    return said if died else f"{said} and did not die when killed (stuck in the kernel: a hung driver or file system)"


def _wait_relayed(proc: subprocess.Popen, pump: _Pump, deadline: float) -> bool:
    """Wait for the command to exit and its pipes to close; False when the deadline comes first.
    Once it has exited, the pipes get AFTER_EXIT more seconds (a child left in the background may
    hold them for good). The waits wake every 0.2 s, so that a signal another thread got is
    handled (see `result_of`)."""
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        draining = pump.alive()
        if exited_at is not None and (not draining or now >= min(exited_at + AFTER_EXIT, deadline)):
            return True
        if now >= deadline:
            return False
        wake = min(deadline, now + 0.2, exited_at + AFTER_EXIT if exited_at is not None else deadline)
        if draining:
            pump.join(wake - now)
        else:
            try:
                proc.wait(timeout=wake - now)
            except subprocess.TimeoutExpired:
                pass


def _translate(exc: Exception, doing: str, path, instead: str):
    from doctor.errors import DoctorError
    from doctor.writes import os_error

    if isinstance(exc, OSError):
        return os_error(exc, doing, path, instead)
    return DoctorError(f"cannot {doing} {path!r}: {exc}", "a path cannot hold a NUL byte", error_id="io.bad-path")


class _TempDir:
    def __init__(self, path: Path, real: Path) -> None:
        self.path, self.real = path, real

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        from doctor.writes import rmtree

        rmtree(self.real)


def _current_dir() -> Path:
    """The working directory. When it is gone (a build folder removed while the shell stayed in
    it), the path the shell still shows ($PWD), else /: nothing of the project is found there,
    and every command runs instead of crashing on getcwd."""
    try:
        return Path.cwd()
    except OSError:  # FileNotFoundError: removed; PermissionError: a parent no longer searchable
        pwd = os.environ.get("PWD", "")
        return Path(pwd) if os.path.isabs(pwd) else _ROOT


def _safely(predicate) -> bool:
    try:
        return bool(predicate())
    except (OSError, ValueError):
        return False


class _Capped:
    """Drain one pipe in a thread, keeping at most `limit` bytes: the first half and the last
    half (a tool's header and a build's final error both survive). The rest is read and dropped,
    so the child never blocks on a full pipe and a flood never fills our memory."""

    def __init__(self, stream, limit: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self._stream, self._half = stream, max(1, limit // 2)
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := self._stream.read1(1 << 16):
                room = self._half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                if len(self.tail) > self._half:
                    self.dropped += len(self.tail) - self._half
                    del self.tail[: len(self.tail) - self._half]
        except (OSError, ValueError):
            pass
        finally:
            self._stream.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes dropped by torch-doctor ...]\n".encode() if self.dropped else b""
        data = bytes(self.head) + gap + bytes(self.tail)
        # Universal newlines, as text-mode pipes gave: CR-only and CRLF line ends are lines.
        return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


class _Spool:
    """The bytes a relayed command printed, in arrival order, in a temporary file: the first
    `limit` of them; the rest are counted. A full disk stops the keeping, never the command."""

    def __init__(self, file, limit: int) -> None:
        self._file, self._left = file, limit
        self.kept = self.dropped = 0
        self.error = ""
        self._done = False
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            if self._done:  # read back already: a child left behind still prints
                return
            wanted = b"" if self.error else memoryview(chunk)[: self._left]
            written = 0
            while written < len(wanted):  # a write stops short where the disk (or `ulimit -f`) does
                try:
                    written += self._file.write(wanted[written:])
                except (OSError, ValueError) as exc:
                    self.error = _reason(exc)
                    break
            self._left -= written
            self.kept += written
            self.dropped += len(chunk) - written

    def read_back(self) -> tuple[bytes, int, str]:
        """(the bytes kept, the bytes printed and not kept, why fewer were kept than asked)."""
        with self._lock:
            self._done = True
            try:
                fd = self._file.fileno()
                os.lseek(fd, 0, os.SEEK_SET)
                data = read_fd(fd, self.kept)
            except (OSError, ValueError) as exc:
                data, self.error = b"", self.error or _reason(exc)
            return data, self.dropped + self.kept - len(data), self.error


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)


class _Pump:
    """Drain a relayed command's pipes, a thread each: each chunk on to its sink at once, byte for
    byte, and into the spool. Between two pipes, "in the order they arrived" is the order the
    threads read them: a line of stderr may be kept a chunk of stdout away from where the command
    wrote it, as in any capture of two pipes. A sink that fails (the reader of `doctor … | head`
    went away) is given up while its pipe is still drained, so that the command neither blocks
    nor dies of it."""

    def __init__(self, pipes: list, sinks: list, spool: _Spool) -> None:
        self._pipes, self._sinks, self._spool = pipes, list(sinks), spool
        self._stopped = False
        self._threads = [threading.Thread(target=self._drain, args=(i,), daemon=True) for i in range(len(pipes))]
        for thread in self._threads:
            thread.start()

    def _drain(self, index: int) -> None:
        pipe = self._pipes[index]
        try:
            while (chunk := pipe.read1(1 << 16)) and not self._stopped:
                sink = self._sinks[index]
                if sink is not None:
                    try:
                        sink.write(chunk)
                        sink.flush()
                    except (OSError, ValueError):
                        self._sinks[index] = None
                self._spool.add(chunk)
        except (OSError, ValueError):
            pass
        finally:
            pipe.close()

    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def join(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))

    def stop(self) -> None:
        """Pass nothing on from here: the report follows. What a child left in the background
        writes later stays in the pipe until the doctor exits."""
        self._stopped = True


def _feed(stdin, text: str) -> None:
    try:
        stdin.write(text.encode("utf-8", "replace"))
        stdin.close()
    except OSError:  # the command exited without reading its input
        pass


# The commands running now, in any thread: each has a session of its own, so a Ctrl-C or SIGTERM
# that ends the doctor reaches none of them, and a probe thread would wait out its timeout.
# No lock: kill_running runs in a signal handler, on the main thread between two bytecodes, and
# a lock that thread held at that moment (adding its own command) would deadlock it for good:
# the Ctrl-C test stalled so in two CI runs, right as the main thread started the hung command.
# None is needed either: under the GIL `set.add`, `list(set)` and the flag
# are each atomic, and run() adds before it reads the flag while kill_running sets the flag
# before it takes its list, so every command is killed by one side or the other.
_RUNNING: set[subprocess.Popen] = set()
_STOPPING = False


def kill_running() -> None:
    """Kill every command the doctor runs now, and any a thread starts from here on (cli, when a
    signal ends the run; the process is ending): their threads see the pipes close and finish."""
    global _STOPPING
    _STOPPING = True
    for proc in list(_RUNNING):
        _kill_group(proc)


def result_of(future):
    """`future.result()` for the main thread, waking every 0.2 s. The kernel may hand SIGTERM to
    any thread, and Python runs the handler only when the main thread runs again: blocked in an
    untimed wait on a probe whose command hangs, it would not for the probe's whole timeout (a
    SIGTERM test hung 1 run in 100 so, its handler never run)."""
    from concurrent.futures import wait

    while not future.done():
        wait([future], timeout=0.2)
    return future.result()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def _child_env(host: Host) -> dict[str, str]:
    """The environment for a command the doctor runs: the host's, with LD_LIBRARY_PATH pruned
    (see `_pruned_library_path`)."""
    pruned = _pruned_library_path(host)
    return dict(host.env) if pruned is None else {**host.env, "LD_LIBRARY_PATH": pruned[0]}


def _pruned_library_path(host: Host) -> tuple[str, Mapping[str, frozenset[str]]] | None:
    """LD_LIBRARY_PATH without the entries that cannot hold a library (missing, not a directory,
    an empty directory, a repeat), and the names each entry was listed with; None when it is
    left as it is. The loader finds exactly the same libraries, but a child no longer pays
    ld.so's search of thousands of empty directories for each library it loads (issue 19: a
    probe runs a dozen commands). Empty entries (the current directory) and directories that
    cannot be listed stay. Worked out once per Host and value, on the first command: probes
    start theirs at once, so the others wait for it. Only on the real file system: a test
    host's paths are not real."""
    value = host.env.get("LD_LIBRARY_PATH")
    if not value or host.root != _ROOT or value.count(":") < 16:
        return None
    with host._library_path_lock:
        found = host._library_path.get(value)
        if found is None:
            found = host._library_path[value] = _prune_library_path(value)
        return found


def _prune_library_path(value: str) -> tuple[str, dict[str, frozenset[str]]]:
    kept: list[str] = []
    seen: set[str] = set()
    listings: dict[str, frozenset[str]] = {}
    for entry in value.split(":"):
        if entry and entry in seen:
            continue
        seen.add(entry)
        names = _names_in(entry) if entry else None
        if names is not None:
            listings[entry] = names
            if not names:
                continue
        kept.append(entry)
    pruned = ":".join(kept) or (":" if kept else "")  # a lone empty entry still means "."
    return pruned, listings


def _names_in(directory: str) -> frozenset[str] | None:
    """What the loader can find in an LD_LIBRARY_PATH entry: its names (none when it is missing
    or not a directory), or None when it cannot be listed (execute-only: ld.so may still open
    files in it). os.listdir, not a scandir peek: 2,000 empty directories in 16 ms against 22,
    and the loader probe takes the names from here instead of listing each again."""
    try:
        return frozenset(os.listdir(directory))
    except (NotADirectoryError, FileNotFoundError):
        return frozenset()
    except OSError:
        return None


def read_fd(fd: int, limit: int, size: int | None = None) -> bytes:
    """At most `limit` bytes of the open `fd`, to its end. A regular file's size (`size`, else
    fstat's) comes in one read (a 100 MB log: no 100 chunks joined); a pipe, or a file that grows
    meanwhile, in 1 MiB reads into one growing buffer, whose bytes are handed over without a
    second copy. Nothing is reserved up front: `read(limit)` asks for `limit` bytes at once, and
    a 1 GiB limit under `ulimit -v` failed a 30-byte log on stdin (docs/security.md, "explain:
    hostile logs")."""
    import io

    if size is None:
        st = os.fstat(fd)
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    first = os.read(fd, min(limit, max(size + 1, 1 << 20)))
    chunk = os.read(fd, min(limit - len(first), 1 << 20)) if first and len(first) < limit else b""
    if not chunk:  # all of it in the first read: a regular file, a short pipe
        return first
    buffer, left = io.BytesIO(), limit - len(first)
    buffer.write(first)
    del first
    while chunk:
        buffer.write(chunk)
        left -= len(chunk)
        chunk = os.read(fd, min(left, 1 << 20)) if left > 0 else b""
    return buffer.getvalue()
