"""The human report, in the flutter-doctor manner: one line per area, details with -v."""

from __future__ import annotations

from doctor.model import Finding, Level, Report
from doctor.quoting import for_terminal

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
            lines.extend(f"    • {_line(d)}" for d in area.details)
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
    out.extend(f"      {line}" for line in for_terminal(f.detail).splitlines() if line.strip())
    if f.fix:
        fix_lines = for_terminal(f.fix).splitlines()
        out.append(f"      fix: {fix_lines[0]}")
        out.extend(f"           {line}" for line in fix_lines[1:])
    if verbose:
        out.extend(f"      evidence: {_line(str(e))}" for e in f.evidence)
    return out


def _line(text: str) -> str:
    # Paths, versions and tool output reach these fields: shown, never acted on by the terminal.
    return for_terminal(text, one_line=True)


def _summary(report: Report) -> str:
    findings = report.findings
    errors = sum(f.level is Level.ERROR for f in findings)
    warnings = sum(f.level is Level.WARNING for f in findings)
    if not errors and not warnings:
        return "No problems found."
    areas = sum(a.level.rank >= Level.WARNING.rank for a in report.areas)
    parts = [f"{errors} error{'s' * (errors != 1)}", f"{warnings} warning{'s' * (warnings != 1)}"]
    return f"Doctor found problems in {areas} area{'s' * (areas != 1)}: {', '.join(parts)}."
