"""The facts of this machine explain may use: plain values the command layer gathered.

explain never looks at the machine itself. The command layer (doctor/explain_machine.py, run
by `doctor explain` and the build probe) probes the active libtorch, asks which of the files the
log names exist (`lookups`), and hands the answers in. What is not here, explain does not say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING

from doctor.model import Evidence
from doctor.record import record

if TYPE_CHECKING:
    from doctor.explain.patterns import Rule

# The only variables explain reads (the command layer passes these, not the whole environment).
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH")


@record(frozen=True)
class LibtorchFacts:
    """The active libtorch as the probes found it."""

    root: str
    label: str  # "2.13.0+cpu"
    lib_dir: str
    include_dirs: tuple[str, ...] = ()
    version: str | None = None
    variant: str | None = None
    abi: str | None = None  # "cxx11" | "pre-cxx11" | None
    abi_source: str | None = None
    cxx_standard: int | None = None
    cxx_standard_source: str | None = None
    elf_machine: str | None = None


@record(frozen=True)
class MachineFacts:
    """What explain knows about this machine; every field may be missing."""

    install: LibtorchFacts | None = None
    system: str = "Linux"
    machine: str = "x86_64"
    glibc: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    looked: frozenset[str] = frozenset()  # paths the command layer looked for …
    present: frozenset[str] = frozenset()  # … and those of them that exist

    def has(self, path: str) -> bool:
        """The file was looked for and exists."""
        return path in self.present

    def lacks(self, path: str) -> bool:
        """The file was looked for and does not exist (not looked for: neither has nor lacks)."""
        return path in self.looked and path not in self.present


@record
class Advice:
    title: str
    detail: list[str]
    fix: str
    subject: str = ""
    evidence: list[Evidence] = field(default_factory=list)


def rule_advice(rule: Rule) -> Advice:
    """The pattern table's own words for an id: its advice where the log names nothing more."""
    return Advice(rule.title, [rule.cause], rule.fix)
