"""The one JSON envelope every command prints under --json (documented in docs/json-schema.md).

    {"schema": "torch-doctor/report", "schema_version": 2, "command": "check",
     "doctor_version": "…", "ok": true, "exit_code": 0, …the command's result…}

or, when the command failed before it had a result,

    {…the same first six keys…, "ok": false, "exit_code": 1,
     "error": {"id": "<area>.<what>", "message": "…", "hint": "…"}}

`ok` is true exactly when `exit_code` is 0. The result keys are the command's own (a report's
`areas`/`findings`/`facts`, fetch's `action`/`dest`/`plan`, cache-key's `key`…): they sit
beside the envelope keys, as in schema version 1, so adding the envelope changed no key a
consumer already read (pipx's result.py: one renderer for every command's result).
"""

from __future__ import annotations

import json
from typing import Any

from doctor.model import SCHEMA_VERSION, Level, Report, to_jsonable
from doctor.quoting import valid_unicode

SCHEMA = "torch-doctor/report"
ENVELOPE_KEYS = ("schema", "schema_version", "command", "doctor_version", "ok", "exit_code")


def envelope(command: str, exit_code: int = 0, result: dict[str, Any] | None = None,
             error: dict[str, str] | None = None) -> dict[str, Any]:
    """The envelope around `result` (a success or a report) or around `error`."""
    from doctor import __version__

    out: dict[str, Any] = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "command": command,
                           "doctor_version": __version__, "ok": exit_code == 0 and error is None,
                           "exit_code": exit_code}
    if error is not None:
        out["error"] = {"id": error.get("id") or "error", "message": error.get("message", ""),
                        "hint": error.get("hint", "")}
        return out
    clash = set(ENVELOPE_KEYS) & set(result or {})
    if clash:  # a doctor bug: a result must not overwrite the envelope
        raise ValueError(f"result keys {sorted(clash)} collide with the envelope")
    out.update(to_jsonable(result or {}))
    return out


def error_envelope(command: str, exit_code: int, id: str, message: str, hint: str = "") -> dict[str, Any]:
    return envelope(command, exit_code, error={"id": id, "message": message, "hint": hint})


def as_dict(report: Report) -> dict:
    findings = report.findings
    result = {
        "strict": report.strict,
        "summary": {
            "errors": sum(f.level is Level.ERROR for f in findings),
            "warnings": sum(f.level is Level.WARNING for f in findings),
        },
        "areas": [
            {"name": a.name, "title": a.title, "level": a.level.value, "summary": a.summary, "details": a.details}
            for a in report.areas
        ],
        "findings": findings,
        "facts": report.facts,
        **report.extra,
    }  # made plain once, by envelope
    out = envelope(report.command, report.exit_code(), result)
    if report.doctor_version:
        out["doctor_version"] = report.doctor_version
    return out


def dumps(data: dict) -> str:
    text = json.dumps(data, indent=2)
    if "\\ud" in text:  # a lone surrogate (an undecodable path), or a character beyond U+FFFF as its pair
        text = json.dumps(_valid_unicode(data), indent=2)
    return text


def _valid_unicode(value: Any) -> Any:
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_unicode(v) for v in value]
    return value


def render(report: Report, verbose: int = 0, color: bool = False) -> str:
    return dumps(as_dict(report))
