"""GitHub Actions output: the plain report for the log, `::error` / `::warning` annotations for
the run's summary page, and the block for `$GITHUB_STEP_SUMMARY` (`summary_block`). Text only:
the command layer (doctor/commands/_output.py) appends the block, through the Host.

Workflow commands are parsed line by line, so the message and each property are escaped the
way GitHub's own toolkit does (@actions/core `escapeData` / `escapeProperty`). The runner prints
an annotation in the job's log as well as on the summary page: its text first shows control and
bidirectional-override characters as escapes (doctor.quoting.for_terminal), keeping CR and LF,
which escapeData carries exactly.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from doctor.model import Finding, Level, Report
from doctor.quoting import for_terminal, valid_unicode
from doctor.render.text import message_lines

# Only these levels become annotations; ok/info findings stay in the log.
COMMAND = {Level.ERROR: "error", Level.WARNING: "warning"}


def default_format(env: Mapping[str, str]) -> str:
    """The format a report-producing command uses when none is given: github inside Actions."""
    return "github" if env.get("GITHUB_ACTIONS") == "true" else "text"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


LABELS = ("fix:", "docs:")  # the lines an annotation's message starts with its own words


def annotation(finding: Finding, strict: bool = False) -> str | None:
    """One `::error title=…::message` line, or None for findings that are not problems."""
    level = finding.level
    if level is Level.WARNING and strict:
        level = Level.ERROR  # under --strict a warning fails the job, so say so where it shows
    command = COMMAND.get(level)
    if command is None:
        return None
    title = f"{finding.title} [{finding.id}]"
    parts = [*message_lines(finding, LABELS), f"docs: {finding.docs}"]
    return f"::{command} title={escape_property(_shown(title))}::{escape_data(_shown(chr(10).join(parts)))}"


def _shown(text: str) -> str:
    return for_terminal(text, keep_cr=True)


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    """The text report, then one annotation per problem."""
    from doctor.render import text

    # Log excerpts in the report could hold "::" lines; stop-commands makes the runner print
    # them instead of obeying them (GitHub's documented way to echo untrusted text).
    body = text.render(report, verbose=verbose, color=False)
    token = secrets.token_hex(16)
    while token in body:  # the resume line must not be in the text it guards (checked, not hoped)
        token = secrets.token_hex(16)
    lines = [f"::stop-commands::{token}", body, f"::{token}::"]
    lines.extend(a for f in report.findings if (a := annotation(f, report.strict)) is not None)
    return valid_unicode("\n".join(lines))


def warning(title: str, message: str) -> str:
    """A `::warning` line for something about the run itself (not a finding)."""
    return f"::warning title={escape_property(_shown(title))}::{escape_data(_shown(message))}"


# The runner uploads no summary at all when the file is over 128 KiB (actions/runner
# FileCommandManager.cs, CreateStepSummaryCommand._attachmentSizeLimit): a long report must
# not cost the other steps their summaries.
SUMMARY_LIMIT = 128 * 1024


def summary_block(markdown_text: str, current_size: int) -> str:
    """What to append to a step summary file of `current_size` bytes: the markdown and a blank
    line (it keeps several steps' blocks apart), or only its headline and a pointer to the log
    when the whole would pass the runner's limit.

    The markdown escapes outside text itself (render/markdown.cell); the summary is not parsed
    for workflow commands, so `::` lines there are plain text."""
    block = markdown_text.rstrip("\n") + "\n\n"
    if current_size + len(block.encode("utf-8")) > SUMMARY_LIMIT:
        block = (markdown_text.splitlines()[0] + "\n\n_The full table would pass GitHub's 128 KiB step-summary "
                 "limit: see the step's log._\n\n")
    return block
