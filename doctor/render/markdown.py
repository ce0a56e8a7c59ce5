"""Markdown for pull-request comments and the GitHub job summary: a status line, one table row
per area, one table row per problem with its fix, and (with -v) the evidence folded away.

Cells are escaped so that text from logs and paths (`<torch/torch.h>`, `a|b`, `*`) shows as
written instead of turning into HTML, emphasis or extra columns.
"""

from __future__ import annotations

import re

from doctor.model import Level, Report
from doctor.quoting import elided, for_terminal, valid_unicode

MARK = {Level.OK: "✅", Level.INFO: "ℹ️", Level.WARNING: "⚠️", Level.ERROR: "❌"}
_PUNCT = re.compile(r"([\\`*_\[\]|~])")


def cell(text: str) -> str:
    """One table cell: control characters and bidirectional overrides shown as their escapes (log
    bytes that would garble a comment or reorder what it shows), markdown punctuation and HTML
    escaped, newlines as <br>."""
    text = for_terminal(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCT.sub(r"\\\1", text)
    return "<br>".join(line.strip() for line in text.strip().splitlines())


def code(text: str) -> str:
    # A code span cannot hold `|` in a table, and backticks in a fix would end it: <code> can.
    return f"<code>{cell(text)}</code>" if text.strip() else ""


def headline(report: Report) -> str:
    findings = report.findings
    errors = sum(f.level is Level.ERROR for f in findings)
    warnings = sum(f.level is Level.WARNING for f in findings)
    failed = report.exit_code() != 0
    mark = MARK[Level.ERROR] if failed else MARK[Level.WARNING] if warnings else MARK[Level.OK]
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    verdict = "failed" if failed else "passed"
    return f"### {mark} torch-doctor {report.command}: {verdict} ({counts})"


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    lines = [headline(report), ""]
    if report.areas:
        lines += ["| | Area | Status |", "|---|---|---|"]
        lines += [f"| {MARK[a.level]} | {cell(a.title)} | {cell(a.summary)} |" for a in report.areas]
        lines.append("")
    shown = [f for f in report.findings if f.level.rank >= Level.WARNING.rank or (verbose and f.level is Level.INFO)]
    shown.sort(key=lambda f: -f.level.rank)
    if shown:
        lines += ["| | Finding | Problem | Fix |", "|---|---|---|---|"]
        for f in shown:
            problem = f"**{cell(f.title)}**" + (f"<br>{cell(f.detail)}" if f.detail.strip() else "")
            lines.append(f"| {MARK[f.level]} | <code>{cell(f.id)}</code> | {problem} | {code(f.fix)} |")
        lines.append("")
    if verbose:
        lines += _evidence(report)
    return valid_unicode("\n".join(lines).rstrip("\n") + "\n")


def _evidence(report: Report) -> list[str]:
    rows = [(f, e) for f in report.findings for e in f.evidence]
    if not rows:
        return []
    out = ["<details><summary>Evidence</summary>", "", "| Finding | Kind | Source | Excerpt |", "|---|---|---|---|"]
    out += [f"| <code>{cell(f.id)}</code> | {cell(e.kind)} | {code(e.source)} | {code(elided(e.excerpt))} |" for f, e in rows]
    out += ["", "</details>", ""]
    return out
