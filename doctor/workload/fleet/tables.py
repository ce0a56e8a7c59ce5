"""The tables the text report shows before the areas: nodes, and bandwidth per backend."""

from __future__ import annotations

from doctor.model import Report
from doctor.quoting import for_terminal


def text_tables(report: Report) -> str:
    out = []
    for area in report.areas:
        if area.name == "nodes":
            out += ["Nodes", *(_row(row) for row in area.details), ""]
        elif area.name.startswith("collectives.") and area.details:
            out += [area.title, *(_row(row) for row in area.details), ""]
    return "\n".join(out)


def _row(row: str) -> str:
    # A row holds other nodes' values (host names, versions, paths): a newline in one is shown as
    # \n, not a row of its own.
    return "  " + for_terminal(row, one_line=True)
