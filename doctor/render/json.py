"""The JSON envelope (documented in docs/json-schema.md)."""

from __future__ import annotations

import json

from doctor.model import SCHEMA_VERSION, Level, Report, to_jsonable


def as_dict(report: Report) -> dict:
    findings = report.findings
    return {
        "schema": "torch-doctor/report",
        "schema_version": SCHEMA_VERSION,
        "command": report.command,
        "doctor_version": report.doctor_version,
        "exit_code": report.exit_code(),
        "strict": report.strict,
        "summary": {
            "errors": sum(f.level is Level.ERROR for f in findings),
            "warnings": sum(f.level is Level.WARNING for f in findings),
        },
        "areas": [
            {"name": a.name, "title": a.title, "level": a.level.value, "summary": a.summary, "details": a.details}
            for a in report.areas
        ],
        "findings": to_jsonable(findings),
        "facts": to_jsonable(report.facts),
        **to_jsonable(report.extra),
    }


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    return json.dumps(as_dict(report), indent=2)
