"""`doctor diff A.json B.json`: what differs between two `doctor check --json` reports.

The comparison lives in doctor/diagnose/diff.py; this module reads the two files and renders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from doctor.commands._output import print_report, report_options
from doctor.diagnose.diff import Input, compare
from doctor.errors import UsageError
from doctor.model import SCHEMA_VERSION


def load_report(name: str) -> Input:
    """A `doctor check --json` report from a file (or `-` for stdin), or a UsageError naming it."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{name}: not JSON ({exc})", "write one with: doctor check --json > report.json") from None
    if not isinstance(data, dict) or data.get("schema") != "torch-doctor/report":
        raise UsageError(f"{name}: not a torch-doctor report", "write one with: doctor check --json > report.json")
    if data.get("command") != "check":
        raise UsageError(f"{name}: a `doctor {data.get('command')}` report; diff compares `doctor check --json` reports")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(
            f"{name}: report schema version {version!r}, this doctor reads up to {SCHEMA_VERSION}",
            "compare with the torch-doctor that wrote it, or upgrade: pip install -U torch-doctor",
        )
    if not isinstance(data.get("facts"), dict):
        raise UsageError(f"{name}: the report has no facts")
    return Input(name, data)


@click.command("diff")
@click.argument("report_a", metavar="A.json")
@click.argument("report_b", metavar="B.json")
@report_options
def command(report_a: str, report_b: str, fmt: str | None, as_json: bool, verbose: int, color: str, strict: bool) -> int:
    """Compare two `doctor check --json` reports: A (works) and B (fails), `-` for stdin.

    Lists what differs: libtorch and torch versions, variant, ABI, GPU driver and GPUs,
    toolchain, loader, platform, and the libtorch-related environment variables. Exit 1 when
    a fact a requirement can name differs (version, variant, ABI, driver, GPUs); other
    differences are warnings (exit 1 with --strict); -v also shows machine trivia.
    """
    if report_a == "-" and report_b == "-":
        raise UsageError("only one of A and B can be read from stdin (-)")
    report = compare(load_report(report_a), load_report(report_b))
    report.strict = strict
    return print_report(report, fmt, as_json, verbose, color)
