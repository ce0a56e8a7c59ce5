"""The human report, in the flutter-doctor manner: one line per area, details with -v."""

from __future__ import annotations

from doctor.model import Finding, Level, Report
from doctor.quoting import elided, for_terminal

MARK = {Level.OK: "✓", Level.INFO: "✓", Level.WARNING: "!", Level.ERROR: "✗"}
COLOR = {Level.OK: "32", Level.INFO: "32", Level.WARNING: "33", Level.ERROR: "31"}


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    def paint(text: str, level: Level) -> str:
        return f"\x1b[{COLOR[level]}m{text}\x1b[0m" if color else text

    lines: list[str] = []
    for area in report.areas:
        level = area.level
        lines.append(f"[{paint(MARK[level], level)}] {_line(area.title)}: {_line(area.summary)}")
        if verbose:
            lines.extend(f"    • {_line(elided(d))}" for d in area.details)
        for f in sorted(area.findings, key=lambda f: -f.level.rank):
            if f.level is Level.INFO and not verbose:
                continue
            lines.extend(_finding(f, verbose, paint))
    lines.append("")
    lines.append(_summary(report))
    if not verbose and any(a.details for a in report.areas):
        lines.append(f"Run `doctor {report.command} -v` for details and evidence.")
    return "\n".join(lines)


def _finding(f: Finding, verbose: int, paint) -> list[str]:
    mark = {Level.ERROR: "✗", Level.WARNING: "!", Level.INFO: "•", Level.OK: "•"}[f.level]
    out = [f"    {paint(mark, f.level)} {_line(f.title)} [{_line(f.id)}]"]
    out.extend(f"      {line}" for line in _lines(f.detail) if line.strip())
    if f.fix:
        fix_lines = _lines(f.fix)
        out.append(f"      fix: {fix_lines[0]}")
        out.extend(f"           {line}" for line in fix_lines[1:])
    if verbose:
        out.extend(f"      evidence: {_line(elided(str(e)))}" for e in f.evidence)
    return out


def _line(text: str) -> str:
    # Paths, versions and tool output reach these fields: shown, never acted on by the terminal.
    return for_terminal(text, one_line=True)


LABELS = ("fix:", "evidence:")  # what this renderer writes at the start of a finding's lines


def _lines(text: str) -> list[str]:
    # Only LF breaks a line: for_terminal has written CR and the other C0/C1 breaks as escapes,
    # and U+2028 breaks no terminal's line.
    return labels_kept(for_terminal(text).split("\n"), LABELS)


def labels_kept(lines: list[str], labels: tuple[str, ...]) -> list[str]:
    """A finding's detail or fix, line by line, with the report's labels left to the report. Its
    line breaks are kept, but a line that would begin with one of `labels` can only come from a
    value inside the text (a LIBTORCH path holding a newline and "fix: curl … | sh"): it is shown
    after a \\n, joined to the line before, so no line of a finding reads as the doctor's fix."""
    out: list[str] = []
    for line in lines:
        if line.lstrip().startswith(labels):
            line = (out.pop() if out else "") + "\\n" + line
        out.append(line)
    return out


def message_lines(f: Finding, labels: tuple[str, ...]) -> list[str]:
    """A finding's detail and its `fix: …` lines for a plain-text message (a GitHub annotation,
    a JUnit failure), with `labels` left to the message (labels_kept)."""
    lines = labels_kept(f.detail.strip().split("\n"), labels) if f.detail.strip() else []
    if f.fix:
        fix = labels_kept(f.fix.strip().split("\n"), labels)
        lines += [f"fix: {fix[0]}", *fix[1:]]
    return lines


def _summary(report: Report) -> str:
    findings = report.findings
    errors = sum(f.level is Level.ERROR for f in findings)
    warnings = sum(f.level is Level.WARNING for f in findings)
    if not errors and not warnings:
        return "No problems found."
    areas = sum(a.level.rank >= Level.WARNING.rank for a in report.areas)
    parts = [f"{errors} error{'s' * (errors != 1)}", f"{warnings} warning{'s' * (warnings != 1)}"]
    return f"Doctor found problems in {areas} area{'s' * (areas != 1)}: {', '.join(parts)}."
