"""The `doctor` command line: click commands only, each imported when it is used.

Exit codes (shared/reference/cli-conventions.md): 0 all required checks pass, 1 problems
found or a user-fixable error, 2 usage error, 3 the doctor itself crashed (a crash report is
written and its path printed), 130 interrupted (Ctrl-C); stdout closed early (`| head`) ends
quietly with 1, as click does for the commands themselves.

DOCTOR_DEBUG_CRASH=1 makes any command crash on purpose, so that the crash path is tested.
"""

from __future__ import annotations

import gc
import sys

# Before the other imports: a run keeps what it builds until it exits, so the cyclic collector's
# passes free next to nothing, yet at CPython's default threshold (700 new objects) they ran ~30
# times in a plain check (~10 ms, and longer passes as many libtorch trees add objects). mypy
# sets the same thresholds for its runs. Memory without reference cycles is still freed at once;
# only cycles wait longer. docs/performance.md, "The collector".
if sys.implementation.name == "cpython":
    gc.set_threshold(200_000, 30, 30)

# click.types imports uuid, whose C part links libuuid.so.1: ld.so looks for it in every
# LD_LIBRARY_PATH directory (a cluster's module path on a network file system, a round trip
# each) for a module the doctor never calls. Without _uuid, uuid uses its pure-Python code.
sys.modules.setdefault("_uuid", None)  # type: ignore[assignment]

import importlib
import importlib.util
import os

import click

from doctor import __version__

# name -> module defining a click command called `command`. Imported lazily so
# `doctor --help` and `doctor check` never pay for requests, rich or torch.
COMMANDS = {
    "check": ("doctor.commands.check", "Detect libtorch, torch, toolchain, loader and GPUs; report problems."),
    "fetch-libtorch": ("doctor.commands.fetch", "Download, verify and install the libtorch that matches this machine."),
    "emit": ("doctor.commands.emit", "Write the environment for a libtorch: setenv, nix, github, cabal, cargo, cmake."),
    "explain": ("doctor.commands.explain", "Read a failing build or run log and name the cause and the fix."),
    "smoke": ("doctor.commands.smoke", "Train a tiny model on each device to prove the machine trains (needs torch)."),
    "bench": ("doctor.commands.bench", "GEMM, dispatch overhead and eager-vs-compiled benchmarks (needs torch)."),
    "diff": ("doctor.commands.diff", "Compare two `doctor check --json` reports."),
    "fleet": ("doctor.commands.fleet", "One report for many nodes, under torchrun, srun or mpirun (needs torch)."),
    "cache-key": ("doctor.commands.cache_key", "Print a short stable key for the libtorch a CI job needs."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name, (module, _) in COMMANDS.items() if _available(module)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not _available(COMMANDS[name][0]):
            return None
        return importlib.import_module(COMMANDS[name][0]).command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help comes from the table so that `--help` imports no command module.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="torch-doctor")
def cli() -> None:
    """torch-doctor: make libtorch setup a solved problem.

    Start with `doctor check`; `doctor check -v` shows every detail and its evidence.
    """
    if os.environ.get("DOCTOR_DEBUG_CRASH") == "1":  # hidden: proves the exit-3 path end to end
        raise RuntimeError("crash forced by DOCTOR_DEBUG_CRASH=1")


def main(argv: list[str] | None = None) -> int:
    from doctor.errors import DoctorError, out_of_resources

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        from doctor.address_space import fit_to_limits

        fit_to_limits()
        rv = cli.main(args=args, prog_name="doctor", standalone_mode=False)
        _flush_output()
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        from doctor.errors import Terminated

        signalled = exc if isinstance(exc, Terminated) else exc.__cause__ or exc.__context__
        if isinstance(signalled, Terminated):  # click wraps it in Abort
            import signal

            _say(f"Terminated ({signal.Signals(signalled.signum).name}).")
            return 128 + signalled.signum
        _say("Interrupted.")
        return 130
    except BrokenPipeError:
        return _broken_pipe()
    except click.ClickException as exc:
        if isinstance(exc, _NO_ARGS_IS_HELP):  # bare `doctor` (click >= 8.2): the help, as before
            exc.show()
            return 2
        return _fail(args, *_click_error(exc))
    except DoctorError as exc:
        return _fail(args, exc.exit_code, exc.id, exc.message, exc.hint)
    except Exception as exc:  # the doctor itself crashed: say so, keep the details, and how to report it
        if isinstance(exc, OSError) and _writing_output(exc):  # a full disk under `> report.json`: the world's
            from doctor.writes import os_error

            err = os_error(exc, "write the output to", "standard output", "or send it elsewhere")
            return _fail(args, 1, err.id, err.message, err.hint)
        if out_of_resources(exc):  # `ulimit -v`, a container's memory limit: the world's too
            return _fail(args, 1, "env.out-of-resources", f"the doctor ran out of memory or threads ({type(exc).__name__}: {exc})",
                         "raise the limits it runs under (ulimit -v, ulimit -u, the container's memory), or free memory")
        import traceback  # only here: importing it costs a few ms of every start

        text = _redacted(traceback.format_exc())
        where = write_crash_report(text, args)
        _say(text, one_line=False)
        _say(
            f"torch-doctor {__version__} crashed (a bug, not your setup).\n"
            + (f"crash report: {where}\n" if where else "")
            + "Please report it with the traceback above"
            + (" (saved in the crash report)" if where else "")
            + " and `doctor check --json`.",
            one_line=False,
        )
        command = json_command(args)
        if command:
            hint = f"a bug in torch-doctor {__version__}: please report it" + (f" with {where}" if where else "")
            _print_json_error(command, 3, "internal.crash", text.strip().splitlines()[-1][:500], hint)
        return 3
    return rv if isinstance(rv, int) else 0


def _flush_output() -> None:
    sys.stdout.flush()  # a closed pipe or a full disk shows here, inside the handler, not at exit


def _writing_output(exc: OSError) -> bool:
    """Whether `exc` came from printing (click.echo, or the last flush of stdout)."""
    import traceback

    codes = (click.utils.echo.__code__, _flush_output.__code__)
    return any(frame.f_code in codes for frame, _ in traceback.walk_tb(exc.__traceback__))


def run() -> None:
    """The `doctor` console script and `python -m doctor`: `main()`, then exit.

    Everything still allocated is frozen out of the interpreter's last garbage collection
    first: collecting the modules a run imported took ~17 ms of every exit (against ~10 ms for
    `python -c pass`), 6 ms frozen — the operating system frees the memory anyway. atexit
    handlers, thread joins and the flush of stdout and stderr still run (docs/performance.md,
    "verify"). Not in `main()`: tests call that in-process."""
    _fit_streams()
    _end_on_termination()
    code = main()
    import gc

    gc.freeze()
    sys.exit(code)


def _end_on_termination() -> None:
    """SIGTERM (a cancelled CI job, `timeout`, `docker stop`, Slurm's time limit) and SIGHUP (the
    terminal closed) killed the process on the spot, leaving a fetch's half-written staging tree
    behind; they now end the run as Ctrl-C does (errors.Terminated). A signal the caller set to
    be ignored (`nohup`, SIGINT in a background job) stays ignored; a second one while cleaning
    up is ignored too. Each of these, Ctrl-C included, first kills the commands the doctor is
    running: they sit in sessions of their own, and a probe thread would wait out its timeout."""
    import signal

    from doctor.errors import Terminated

    watched = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    pending: list[int] = []

    def kill_commands() -> None:
        host = sys.modules.get("doctor.host")  # not imported yet: no command is running
        if host is not None:
            host.kill_running()

    def deferred(signum: int, frame) -> bool:
        """Raising inside the import system's own code can leave its lock held (between its
        `acquire_lock()` and the `try` that releases it, or in a lock's weakref callback, where
        the exception is then swallowed): every later import, in any thread, waits forever, and
        so did `check` after a Ctrl-C, 4 runs in 40. Such a signal is sent again 20 ms later."""
        if not can_defer or frame is None or not frame.f_code.co_filename.startswith("<frozen importlib"):
            return False
        pending.append(signum)
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        return True

    def resend(signum: int, frame) -> None:
        while pending:
            os.kill(os.getpid(), pending.pop())

    def terminate(signum: int, frame) -> None:
        if deferred(signum, frame):
            return
        for sig in watched:
            signal.signal(sig, signal.SIG_IGN)
        kill_commands()
        raise Terminated(signum)

    def interrupt(signum: int, frame) -> None:
        if deferred(signum, frame):
            return
        kill_commands()
        signal.default_int_handler(signum, frame)

    # Not on Windows, nor when the caller set its own alarm handler: there a signal is raised at once.
    can_defer = hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    if can_defer:
        signal.signal(signal.SIGALRM, resend)
    for sig in watched:
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, terminate)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupt)


# The text beyond ASCII the doctor prints, in ASCII, for a stream whose encoding lacks it (a
# latin-1 locale; Windows writing a redirected report in its ANSI code page): the marks keep
# their meaning, where the print used to fail (exit 3). Anything else becomes \uXXXX.
# `_fit_streams` also gives a stream the caller closed a sink, for the same reason.
_ASCII = {"✓": "+", "✗": "x", "•": "*", "→": "->", "—": "-", "–": "-", "−": "-", "…": "...", "≥": ">=",
          "≤": "<=", "×": "x", "‘": "'", "’": "'", "“": '"', "”": '"', "µ": "u"}


def _fit_streams() -> None:
    def fallback(exc: UnicodeError) -> tuple[str, int]:
        if not isinstance(exc, UnicodeEncodeError):
            raise exc
        text = exc.object[exc.start:exc.end]
        return "".join(_ASCII.get(c) or c.encode("ascii", "backslashreplace").decode() for c in text), exc.end

    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:  # closed by the caller (`doctor check >&-`): the exit code still answers
            stream = open(os.devnull, mode, encoding="utf-8")
            stream.closed_by_caller = True  # explain refuses to read it as an empty log
            setattr(sys, name, stream)
    for stream in (sys.stdout, sys.stderr):
        try:
            "✓✗•→…".encode(stream.encoding)
        except (UnicodeEncodeError, LookupError):
            import codecs

            codecs.register_error("doctor-ascii", fallback)
            stream.reconfigure(errors="doctor-ascii")
        except (AttributeError, TypeError, ValueError):  # not a text stream, or closed
            pass


def _fail(args: list[str], code: int, id: str, message: str, hint: str) -> int:
    """The one error voice: `error: …` and `hint: …` on stderr; under --json the envelope with
    the same error on stdout too, so a consumer always gets JSON."""
    if code == 2 and not hint:  # every usage error says where to look
        command = next((w for w in args if w in COMMANDS), None)
        hint = f"see `doctor{' ' + command if command else ''} --help`"
    _say(f"error: {message}")
    if hint:
        _say(f"hint: {hint}")
    command = json_command(args)
    if command:
        _print_json_error(command, code, id, message, hint)
    return code


def _print_json_error(command: str, code: int, id: str, message: str, hint: str) -> None:
    from doctor.render.json import dumps, error_envelope

    try:
        click.echo(dumps(error_envelope(command, code, id, message, hint)))
        sys.stdout.flush()
    except OSError:  # stdout closed: the exit code and stderr are what is left
        pass


# click 8.2+ signals a bare `doctor` with this UsageError; 8.1 prints the help itself.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

# click's usage errors by kind -> the error id (docs/json-schema.md lists them)
_CLICK_IDS = (
    (click.exceptions.NoSuchOption, "usage.bad-option"),
    (click.exceptions.BadOptionUsage, "usage.bad-option"),
    (click.exceptions.MissingParameter, "usage.missing-parameter"),
    (click.exceptions.BadParameter, "usage.bad-value"),
    (click.exceptions.BadArgumentUsage, "usage.bad-argument"),
)


def _click_error(exc: click.ClickException) -> tuple[int, str, str, str]:
    """(exit code, id, message, hint) for an error click raised, in the doctor's own voice
    instead of click's "Usage: … Error: …" block."""
    message = exc.format_message()
    if isinstance(exc, click.UsageError):
        ctx = exc.ctx
        path = ctx.command_path if ctx is not None else "doctor"
        error_id = next((i for kind, i in _CLICK_IDS if isinstance(exc, kind)), "usage.bad-input")
        if message.startswith("No such command"):
            error_id = "usage.no-such-command"
        return 2, error_id, message, f"see `{path} --help`"
    return exc.exit_code, "io.file-error", message, ""


def json_command(args: list[str]) -> str | None:
    """The command whose output was asked for as JSON (`--json`, `--format json`), or None.
    Read from the raw arguments, so that an error click raises while parsing them (before any
    command runs) is JSON too. Arguments after `--` belong to another program."""
    words = args[: args.index("--")] if "--" in args else args
    command = next((w for w in words if w in COMMANDS), None)
    if command is None:
        return None
    wants = "--json" in words or "--format=json" in words
    wants = wants or any(a == "--format" and b == "json" for a, b in zip(words, words[1:]))
    return command if wants else None


def _say(text: str, one_line: bool = True) -> None:
    from doctor.commands._say import say  # a message quotes paths, URLs and tool output

    say(text, one_line)


def _broken_pipe() -> int:
    """The reader went away (`doctor check | head -1`): stop quietly. Point stdout at /dev/null
    so the interpreter's final flush does not print 'Exception ignored ... BrokenPipeError'."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 1  # what click's own EPIPE handling returns inside a command: one answer either way


def crash_dir() -> str:
    import platformdirs

    return platformdirs.user_cache_dir("torch-doctor", appauthor=False)


def _redacted(text: str) -> str:
    """`text` with the credentials and query strings of the URLs it quotes shown as ***, as
    everywhere else (docs/fetch.md): a crash report is attached to public bug reports."""
    try:
        from doctor.fetch.names import redact_secrets

        return redact_secrets(text)
    except Exception:  # the crash path never raises: a doctor broken this far keeps its traceback
        return text


def write_crash_report(text: str, argv: list[str]) -> str | None:
    """Save the traceback with what is needed to reproduce it; the path, or None when no folder
    takes it (a cache folder that is a file, a read-only home): then the traceback on stderr
    is the report. URL credentials and query strings, in argv and the text, are redacted."""
    import platform
    import tempfile
    import time

    body = (
        f"torch-doctor {__version__} crash report\n"
        f"time: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        f"argv: {' '.join(repr(_redacted(a)) for a in argv)}\n"
        f"python: {sys.version.split()[0]} on {platform.platform()}\n\n{_redacted(text)}"
    )
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}.txt"
    from doctor.errors import DoctorError
    from doctor.host import Host

    data = body.encode("utf-8", "backslashreplace")
    try:
        host = Host.from_system()
        folders = (os.path.join(crash_dir(), "crashes"), tempfile.gettempdir())
    except Exception:  # the crash came from here too: the traceback on stderr is the report
        return None
    for folder in folders:
        path = os.path.join(folder, name)
        try:
            host.mkdirs(folder)
            host.create_new(path, data, mode=0o600)  # never over a file, never through a link
            return path
        except (DoctorError, OSError):
            continue
    return None


if __name__ == "__main__":
    run()
