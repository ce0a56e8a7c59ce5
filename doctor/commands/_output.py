"""Options every report-producing command shares, and the one place a result leaves the doctor:
renderers return text; this module decides where it goes (stdout, the GitHub step summary)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from doctor.model import Report
from doctor.render import FORMATS, render

if TYPE_CHECKING:
    from doctor.host import Host


class Seconds(click.FloatRange):
    """A FloatRange that also refuses nan: every comparison with nan is false, so a range lets it
    through ('timed out after nan s'), for every command's --timeout."""

    def convert(self, value, param, ctx):
        seconds = super().convert(value, param, ctx)
        if seconds != seconds:
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


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
        from doctor.errors import UsageError

        raise UsageError("--json and --format disagree", "give one of them", error_id="usage.conflicting-options")
    if as_json or fmt:
        return "json" if as_json else fmt
    from doctor.render.github import default_format  # github annotations inside GitHub Actions

    return default_format(os.environ)


def use_color(choice: str, env=os.environ, stream=sys.stdout) -> bool:
    if choice != "auto":
        return choice == "always"
    return "NO_COLOR" not in env and env.get("TERM") != "dumb" and stream.isatty()


def print_report(report: Report, fmt: str | None, as_json: bool, verbose: int, color: str,
                 host: Host | None = None) -> int:
    """Render to stdout and return the exit code, which derives from the findings alone.
    Inside GitHub Actions (format github) the markdown summary also goes to $GITHUB_STEP_SUMMARY."""
    colored = use_color(color)
    chosen = choose_format(fmt, as_json)
    text = render(report, chosen, verbose=verbose, color=colored)
    if chosen == "github":
        if host is None:
            from doctor.host import Host

            host = Host.from_system()
        problem = write_step_summary(host, report, verbose)
        if problem:
            from doctor.render.github import warning

            # The report itself must still come out: a summary we cannot write is only a warning.
            text += "\n" + warning("job summary not written", problem)
    # click strips ANSI codes off a non-terminal unless told the colour was asked for.
    click.echo(text, color=colored or None)
    return report.exit_code()


def write_step_summary(host: Host, report: Report, verbose: int = 0) -> str:
    """Append the markdown summary to the file $GITHUB_STEP_SUMMARY names (how a step adds to the
    job's summary page); returns what went wrong, or "" (also when the variable is unset)."""
    from doctor.errors import DoctorError
    from doctor.render import markdown
    from doctor.render.github import summary_block

    path = host.env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return ""
    block = summary_block(markdown.render(report, verbose=verbose), host.file_size(path))
    try:
        host.append(path, block, doing="append the job summary to",
                    instead="$GITHUB_STEP_SUMMARY must name a writable file (the runner sets it)")
    except DoctorError as exc:
        return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    return ""


def print_result(command: str, result: dict[str, Any], exit_code: int = 0) -> int:
    """A command's non-report result (fetch-libtorch, cache-key) as the JSON envelope."""
    from doctor.render.json import dumps, envelope

    click.echo(dumps(envelope(command, exit_code, result)))
    return exit_code
