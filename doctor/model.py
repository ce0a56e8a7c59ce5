"""The one result type: facts with evidence, findings, and the report that carries both.

Probes return dataclasses whose fields are facts and which carry a list of `Evidence`.
`diagnose` turns facts into `Finding`s; renderers only ever see a `Report`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import field
from pathlib import PurePath
from typing import Any

from doctor.record import record

# Bump when a JSON consumer would have to change; documented in docs/json-schema.md.
SCHEMA_VERSION = 2  # 2: GPU facts carry states, not sentences (docs/json-schema.md)


class Level(str, enum.Enum):
    OK = "ok"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Level.OK: 0, Level.INFO: 1, Level.WARNING: 2, Level.ERROR: 3}


@record(frozen=True)
class Evidence:
    """Where a fact came from: a file read, a command run, an env var, an ELF section."""

    kind: str  # "file" | "command" | "env" | "elf" | "derived" | "log"
    source: str  # path, argv joined, variable name
    excerpt: str = ""  # what it said (trimmed)

    def __str__(self) -> str:
        text = f"{self.kind} {self.source}"
        return f"{text}: {self.excerpt}" if self.excerpt else text


@record
class Finding:
    """One verdict: what is wrong (or fine), why (evidence), and the fix."""
    id: str  # a stable id from docs/findings/ (shared/reference/diagnoses.md)
    level: Level
    title: str
    detail: str = ""
    fix: str = ""  # a command or concrete step
    area: str = ""  # the report area it belongs to ("libtorch", "gpu", ...)
    evidence: list[Evidence] = field(default_factory=list)
    subject: str = ""  # what it is about (a path, a GPU) — keeps ids stable across subjects

    @property
    def docs(self) -> str:
        return f"docs/findings/{self.id}.md"


@record
class Area:
    """One line of the flutter-style summary: a title, a one-line status, detail lines."""

    name: str
    title: str
    summary: str
    details: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def level(self) -> Level:
        return worst(f.level for f in self.findings)


@record
class Report:
    """One command's facts and areas: what every renderer and the JSON envelope show."""
    command: str  # "check", "explain", "smoke", ...
    facts: dict[str, Any]
    areas: list[Area]
    doctor_version: str = ""
    strict: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # The exit code when no finding fails: `explain --from-command` passes a failed command's own
    # code through when it finds no known cause, and the JSON envelope must say the same.
    passthrough_exit: int = 0

    @property
    def findings(self) -> list[Finding]:
        return [f for a in self.areas for f in a.findings]

    def exit_code(self) -> int:
        """0 when every required check passes, 1 otherwise (warnings count under --strict). A failed
        command's own code (passthrough_exit) stands unless an error was found: --strict turns a
        warning into a failure, and that code already is one (124, 128+N keep their meaning)."""
        if any(f.level is Level.ERROR for f in self.findings):
            return 1
        if self.passthrough_exit:
            return self.passthrough_exit
        return 1 if self.strict and any(f.level is Level.WARNING for f in self.findings) else 0


def worst(levels) -> Level:
    return max(levels, key=lambda lv: lv.rank, default=Level.OK)


_PLAIN = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names in order (None for any other type), once per class."""
    return tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and paths to plain JSON values (dataclass field order kept)."""
    if type(value) in _PLAIN:  # most values: tested first, a report holds thousands of them
        return value
    names = _field_names(type(value))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value
