"""The `doctor` command line: click commands only, each imported when it is used.

Exit codes (shared/reference/cli-conventions.md): 0 all required checks pass, 1 problems
found or a user-fixable error, 2 usage error, 3 the doctor itself crashed, 130 interrupted.
"""

from __future__ import annotations

import importlib
import importlib.util
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


def main(argv: list[str] | None = None) -> int:
    from doctor.errors import DoctorError

    try:
        rv = cli.main(args=argv, prog_name="doctor", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Interrupted.", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2 if isinstance(exc, click.UsageError) else exc.exit_code
    except DoctorError as exc:
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return 130
    except BrokenPipeError:
        return 1
    except Exception:  # the doctor itself crashed: say so, and how to report it
        click.echo(traceback.format_exc(), err=True)
        click.echo(
            f"torch-doctor {__version__} crashed (a bug, not your setup). "
            "Please report it with the traceback above and `doctor check --json`.",
            err=True,
        )
        return 3
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
