"""GitHub Actions output: the plain report for the log, `::error` / `::warning` annotations for
the run's summary page, and the markdown table appended to `$GITHUB_STEP_SUMMARY`.

Workflow commands are parsed line by line, so the message and each property are escaped the
way GitHub's own toolkit does (@actions/core `escapeData` / `escapeProperty`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping

from doctor.model import Finding, Level, Report

# Only these levels become annotations; ok/info findings stay in the log.
COMMAND = {Level.ERROR: "error", Level.WARNING: "warning"}


def default_format(env: Mapping[str, str]) -> str:
    """The format a report-producing command uses when none is given: github inside Actions."""
    return "github" if env.get("GITHUB_ACTIONS") == "true" else "text"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, strict: bool = False) -> str | None:
    """One `::error title=…::message` line, or None for findings that are not problems."""
    level = finding.level
    if level is Level.WARNING and strict:
        level = Level.ERROR  # under --strict a warning fails the job, so say so where it shows
    command = COMMAND.get(level)
    if command is None:
        return None
    title = f"{finding.title} [{finding.id}]"
    parts = [finding.detail.strip()] if finding.detail.strip() else []
    if finding.fix:
        parts.append(f"fix: {finding.fix.strip()}")
    parts.append(f"docs: {finding.docs}")
    return f"::{command} title={escape_property(title)}::{escape_data(chr(10).join(parts))}"


def render(report: Report, verbose: int = 0, color: bool = False, env: Mapping[str, str] | None = None) -> str:
    """The text report, then one annotation per problem.

    When `$GITHUB_STEP_SUMMARY` names a file, the markdown summary is appended to it: that file
    is how a step contributes to the job summary page, and only this format knows it is in Actions.
    """
    from doctor.render import markdown, text

    env = os.environ if env is None else env
    # Log excerpts in the report could hold "::" lines; stop-commands makes the runner print
    # them instead of obeying them (GitHub's documented way to echo untrusted text).
    body = text.render(report, verbose=verbose, color=False)
    token = secrets.token_hex(16)
    while token in body:  # the resume line must not be in the text it guards (checked, not hoped)
        token = secrets.token_hex(16)
    lines = [f"::stop-commands::{token}", body, f"::{token}::"]
    lines.extend(a for f in report.findings if (a := annotation(f, report.strict)) is not None)
    summary_path = env.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        problem = append_summary(summary_path, markdown.render(report, verbose=verbose))
        if problem:
            # The report itself must still come out: a summary we cannot write is only a warning.
            lines.append(f"::warning title={escape_property('job summary not written')}::{escape_data(problem)}")
    return "\n".join(lines)


# The runner uploads no summary at all when the file is over 128 KiB (actions/runner
# FileCommandManager.cs, CreateStepSummaryCommand._attachmentSizeLimit): a long report must
# not cost the other steps their summaries.
SUMMARY_LIMIT = 128 * 1024


def append_summary(path: str, markdown_text: str) -> str:
    """Append to the step summary file; returns what went wrong, or "" on success.

    The markdown escapes outside text itself (render/markdown.cell); the summary is not parsed
    for workflow commands, so `::` lines there are plain text."""
    block = markdown_text.rstrip("\n") + "\n\n"  # a blank line keeps several steps' blocks apart
    try:
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        if size + len(block.encode("utf-8")) > SUMMARY_LIMIT:
            block = (markdown_text.splitlines()[0] + "\n\n_The full table would pass GitHub's 128 KiB step-summary "
                     "limit: see the step's log._\n\n")
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(block)
    except OSError as exc:
        return f"cannot append to GITHUB_STEP_SUMMARY={path}: {exc.strerror or exc}"
    return ""
