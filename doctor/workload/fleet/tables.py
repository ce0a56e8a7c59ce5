"""The tables the text report shows before the areas: nodes, and bandwidth per backend."""

from __future__ import annotations

from doctor.model import Report


def text_tables(report: Report) -> str:
    out = []
    for area in report.areas:
        if area.name == "nodes":
            out += ["Nodes", *(f"  {row}" for row in area.details), ""]
        elif area.name.startswith("collectives.") and area.details:
            out += [area.title, *(f"  {row}" for row in area.details), ""]
    return "\n".join(out)
