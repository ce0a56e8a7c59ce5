"""The `doctor` command line: click commands only, each imported when it is used.

Exit codes (shared/reference/cli-conventions.md): 0 all required checks pass, 1 problems
found or a user-fixable error, 2 usage error, 3 the doctor itself crashed (a crash report is
written and its path printed), 130 interrupted (Ctrl-C); stdout closed early (`| head`) ends
quietly with 1, as click does for the commands themselves.

DOCTOR_DEBUG_CRASH=1 makes any command crash on purpose, so that the crash path is tested.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback

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
    from doctor.errors import DoctorError

    try:
        rv = cli.main(args=argv, prog_name="doctor", standalone_mode=False)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
    except (click.exceptions.Abort, KeyboardInterrupt):
        _say("Interrupted.")
        return 130
    except BrokenPipeError:
        return _broken_pipe()
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except DoctorError as exc:
        _say(f"error: {exc.message}")
        if exc.hint:
            _say(f"hint: {exc.hint}")
        return exc.exit_code
    except Exception:  # the doctor itself crashed: say so, keep the details, and how to report it
        text = traceback.format_exc()
        where = write_crash_report(text, argv if argv is not None else sys.argv[1:])
        _say(text)
        _say(
            f"torch-doctor {__version__} crashed (a bug, not your setup).\n"
            + (f"crash report: {where}\n" if where else "")
            + "Please report it with the traceback above"
            + (" (saved in the crash report)" if where else "")
            + " and `doctor check --json`."
        )
        return 3
    return rv if isinstance(rv, int) else 0


def _say(text: str) -> None:
    try:
        click.echo(text, err=True)
    except OSError:  # stderr closed too: the exit code is all that is left
        pass


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


def write_crash_report(text: str, argv: list[str]) -> str | None:
    """Save the traceback with what is needed to reproduce it; the path, or None when no folder
    takes it (a cache folder that is a file, a read-only home): then the traceback on stderr
    is the report."""
    import platform
    import tempfile
    import time

    body = (
        f"torch-doctor {__version__} crash report\n"
        f"time: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        f"argv: {' '.join(repr(a) for a in argv)}\n"
        f"python: {sys.version.split()[0]} on {platform.platform()}\n\n{text}"
    )
    name = f"crash-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.getpid()}.txt"
    for folder in (os.path.join(crash_dir(), "crashes"), tempfile.gettempdir()):
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(body)
            return path
        except OSError:
            continue
    return None


if __name__ == "__main__":
    sys.exit(main())
