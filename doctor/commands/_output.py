"""Options every report-producing command shares, and the one place a report is printed."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import click

from doctor.model import Report
from doctor.render import FORMATS, render


def report_options(func: Callable) -> Callable:
    """--format/--json, -v, --color, --strict: the same on check, explain, smoke and bench."""
    options = [
        click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None,
                     help="Output format (default: text)."),
        click.option("--json", "as_json", is_flag=True, help="Short for --format json."),
        click.option("-v", "--verbose", count=True, help="Show details and the evidence behind each verdict."),
        click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
                     show_default=True, help="Colour the text report (auto: only on a terminal, not with NO_COLOR)."),
        click.option("--strict", is_flag=True, help="Treat warnings as failures (exit 1)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def choose_format(fmt: str | None, as_json: bool) -> str:
    if fmt and as_json and fmt != "json":
        raise click.UsageError("--json and --format disagree; give one of them")
    if as_json or fmt:
        return "json" if as_json else fmt
    from doctor.render.github import default_format  # github annotations inside GitHub Actions

    return default_format(os.environ)


def use_color(choice: str, env=os.environ, stream=sys.stdout) -> bool:
    if choice != "auto":
        return choice == "always"
    return "NO_COLOR" not in env and env.get("TERM") != "dumb" and stream.isatty()


def print_report(report: Report, fmt: str | None, as_json: bool, verbose: int, color: str) -> int:
    """Render to stdout and return the exit code, which derives from the findings alone."""
    colored = use_color(color)
    text = render(report, choose_format(fmt, as_json), verbose=verbose, color=colored)
    # click strips ANSI codes off a non-terminal unless told the colour was asked for.
    click.echo(text, color=colored or None)
    return report.exit_code()
