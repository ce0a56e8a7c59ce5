"""Renderers: one Report in, text out. The format table is the only registry."""

from __future__ import annotations

import importlib

from doctor.model import Report

# format -> module with `render(report, verbose=0, color=False) -> str`
FORMATS = {
    "text": "doctor.render.text",
    "json": "doctor.render.json",
    "github": "doctor.render.github",
    "junit": "doctor.render.junit",
    "markdown": "doctor.render.markdown",
}


def render(report: Report, fmt: str, *, verbose: int = 0, color: bool = False) -> str:
    module = importlib.import_module(FORMATS[fmt])
    return module.render(report, verbose=verbose, color=color)
