"""`doctor diff A.json B.json`: what differs between two `doctor check --json` reports.

The comparison lives in doctor/diagnose/diff.py; this module reads the two files and renders.
"""

from __future__ import annotations

import json
import os
import stat
import sys

import click

from doctor.commands._output import print_report, report_options
from doctor.diagnose.diff import Input, compare
from doctor.errors import UsageError
from doctor.model import SCHEMA_VERSION


MAX_REPORT_BYTES = 16 << 20  # a real report is a few tens of KiB
WRITE_ONE = "write one with: doctor check --json > report.json"


def _read(name: str) -> bytes:
    """At most MAX_REPORT_BYTES + 1 bytes of the file, a pipe (`<(doctor check --json)`) or stdin.
    A device or a directory is refused before reading."""
    if name == "-":
        return sys.stdin.buffer.read(MAX_REPORT_BYTES + 1)
    try:
        mode = os.stat(name).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            raise UsageError(f"{name}: not a regular file", WRITE_ONE)
        with open(name, "rb") as fh:
            return fh.read(MAX_REPORT_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise UsageError(f"{name}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def load_report(name: str) -> Input:
    """A `doctor check --json` report from a file (or `-` for stdin), or a UsageError naming it."""
    from doctor.bounded import MAX_DEPTH, json_depth_exceeds, lone_surrogate

    raw = _read(name)
    if len(raw) > MAX_REPORT_BYTES:
        raise UsageError(f"{name}: larger than {MAX_REPORT_BYTES >> 20} MiB, not a doctor report", WRITE_ONE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name}: not UTF-8 (byte {exc.start})", WRITE_ONE) from None
    if json_depth_exceeds(text):
        raise UsageError(f"{name}: nested deeper than {MAX_DEPTH} levels, not a doctor report", WRITE_ONE)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: syntax, or an integer of > 4300 digits
        raise UsageError(f"{name}: not JSON ({str(exc)[:200]})", WRITE_ONE) from None
    bad = lone_surrogate(data)
    if bad is not None:
        raise UsageError(f"{name}: {bad[:200]} holds a lone surrogate (an escaped \\ud800-\\udfff with no pair)",
                         "a report doctor writes is valid Unicode: write it again with doctor check --json")
    if not isinstance(data, dict) or data.get("schema") != "torch-doctor/report":
        raise UsageError(f"{name}: not a torch-doctor report", "write one with: doctor check --json > report.json")
    if isinstance(data.get("error"), dict):  # the envelope of a check that failed to run
        err = data["error"]
        raise UsageError(f"{name}: holds the error of a failed `doctor check` ({str(err.get('id'))[:60]}: "
                         f"{str(err.get('message'))[:200]}), not a report", WRITE_ONE, error_id="usage.not-a-report")
    if data.get("command") != "check":
        raise UsageError(f"{name}: a `doctor {str(data.get('command'))[:40]}` report; diff compares `doctor check --json` reports")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(
            f"{name}: report schema version {repr(version)[:40]}, this doctor reads up to {SCHEMA_VERSION}",
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
    a, b = load_report(report_a), load_report(report_b)
    try:
        report = compare(a, b)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
        # Valid JSON in another shape (hand-edited, or from another tool): say so, not crash.
        raise UsageError(f"{report_a} or {report_b}: not in the shape `doctor check --json` writes ({exc})",
                         WRITE_ONE) from None
    report.strict = strict
    return print_report(report, fmt, as_json, verbose, color)
