"""A project's policy for `doctor check`: `[tool.doctor]` in ./pyproject.toml, or ./doctor.toml.

    [tool.doctor]
    min-version = "0.1"                      # the oldest torch-doctor that understands this file
    require = ["libtorch>=2.5,<2.14", "abi=cxx11"]
    error-on = ["toolchain.cxxflags-abi"]    # warnings that fail this project's CI
    ignore = { "loader.library-not-found" = "we set LD_LIBRARY_PATH in the build script" }

A policy is checked strictly: an unknown key, a value of the wrong type, a malformed
requirement, an ignore without a reason or a finding id both ignored and escalated is a
UsageError (exit 2) naming the key and the file, because a typo that silently disables a
CI rule is worse than a failed job.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import field
from pathlib import PurePath

from doctor.errors import UsageError
from doctor.findings import FINDINGS
from doctor.model import Level, Report
from doctor.record import record

FILES = ("doctor.toml", "pyproject.toml")
KEYS = ("min-version", "require", "error-on", "ignore")
# Finding ids are dotted, lower-case words: "abi.mismatch", "loader.library-not-found".
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+$")
# Every finding id the doctor can report (doctor/findings.py, one docs page each). A typo in
# error-on or ignore would silently do nothing: it is refused.
FINDING_IDS = frozenset(FINDINGS)


@record(frozen=True)
class Policy:
    """A project's doctor policy: requirements, which findings fail, which are ignored."""
    source: str  # "pyproject.toml [tool.doctor]" or "doctor.toml": named in every message
    requirements: tuple[str, ...] = ()  # requirement strings, validated by parse_policy
    error_on: frozenset[str] = frozenset()
    ignore: dict[str, str] = field(default_factory=dict)  # finding id -> reason
    min_version: str | None = None


@record(frozen=True)
class PolicyFile:
    """One candidate policy file as the command layer found it (doctor.check.load_policy reads them)."""

    path: str
    name: str  # one of FILES
    text: str | None  # None: absent or unreadable
    irregular: bool = False  # present but not a regular file (a FIFO, a device): never read
    unreadable: bool = False  # a regular file that could not be read (permissions, an I/O error)


def policy_from_files(files: list[PolicyFile], doctor_version: str | None = None) -> Policy | None:
    """The policy the files hold (at most one may hold one), or None when none does."""
    found: list[tuple[str, dict]] = []
    for f in files:
        path = PurePath(f.path)
        if f.text is None:
            if f.irregular:  # never read, never skipped silently
                raise UsageError(f"{path}: not a regular file, so its policy cannot be read",
                                 f"replace {f.name} with a regular file")
            if f.unreadable:  # a policy it may hold would be skipped: CI would pass unchecked
                raise UsageError(f"{path}: cannot be read by this user, so the policy it may hold cannot be applied",
                                 f"make {f.name} readable by this user (`ls -l` shows its permissions), "
                                 "or run from another folder")
            continue
        data = _parse_toml(f.text, path)
        if f.name == "pyproject.toml":
            tool = data.get("tool")
            table = tool.get("doctor") if isinstance(tool, dict) else None
            if table is None:
                continue
            if not isinstance(table, dict):
                raise UsageError(f"{path}: [tool.doctor] must be a table")
            found.append((f"{path} [tool.doctor]", table))
        else:
            found.append((str(path), data))
    if not found:
        return None
    if len(found) > 1:
        raise UsageError(
            f"two doctor policies: {found[0][0]} and {found[1][0]}",
            "keep one of them, so that nobody edits the one that is not read",
        )
    source, table = found[0]
    return parse_policy(table, source, doctor_version)


def _parse_toml(text: str, path: PurePath) -> dict:
    """tomllib recurses and converts integers of any length: bound both before it runs."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, published as tomli
        import tomli as tomllib  # type: ignore[no-redef]

    from doctor.bounded import MAX_DEPTH, toml_depth_exceeds

    hint = "see docs/policy.md for the accepted keys and values"
    if toml_depth_exceeds(text):
        raise UsageError(f"{path}: nested deeper than {MAX_DEPTH} levels", hint)
    try:
        return tomllib.loads(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError, as is a 5000-digit integer
        raise UsageError(f"{path}: not valid TOML: {str(exc)[:200]}", hint) from None


def parse_policy(table: dict, source: str, doctor_version: str | None = None) -> Policy:
    """Validate one policy table; `source` names the file in every error."""
    from packaging.version import InvalidVersion, Version

    if doctor_version is None:
        from doctor import __version__ as doctor_version

    def bad(key: str, why: str) -> UsageError:
        return UsageError(f"{source}: {key}: {why}", "see docs/policy.md for the accepted keys and values")

    # min-version first: a newer policy may use keys this version does not know yet, and
    # "upgrade torch-doctor" is the message that helps then, not "unknown key".
    min_version = table.get("min-version")
    if min_version is not None:
        if not isinstance(min_version, str):
            raise bad("min-version", f"must be a version string like \"0.1\", not {min_version!r}")
        try:
            wanted = Version(min_version)
        except (InvalidVersion, ValueError):  # ValueError: a number of > 4300 digits
            raise bad("min-version", f"{min_version!r} is not a version") from None
        if Version(doctor_version) < wanted:
            raise UsageError(
                f"{source}: min-version: this policy needs torch-doctor >= {min_version}, this is {doctor_version}",
                f"pip install -U 'torch-doctor>={min_version}'",
            )

    unknown = [k for k in table if k not in KEYS]
    if unknown:
        raise bad(unknown[0], f"unknown key (known: {', '.join(KEYS)})")

    require = table.get("require", [])
    if not isinstance(require, list) or not all(isinstance(r, str) for r in require):
        raise bad("require", 'must be a list of strings like ["libtorch>=2.5", "abi=cxx11"]')
    from doctor.requirements import parse_requirement

    for text in require:
        try:
            parse_requirement(text)
        except UsageError as exc:
            raise UsageError(f"{source}: require: {exc.message}", exc.hint) from None

    error_on = table.get("error-on", [])
    if not isinstance(error_on, list) or not all(isinstance(i, str) for i in error_on):
        raise bad("error-on", 'must be a list of finding ids like ["abi.mismatch"]')
    for fid in error_on:
        _known_id(bad, "error-on", fid)

    ignore = table.get("ignore", {})
    if not isinstance(ignore, dict):
        raise bad("ignore", 'must be a table of finding id = "reason"')
    for fid, reason in ignore.items():
        _known_id(bad, "ignore", fid)
        if fid == "requirement.unmet":  # it would cancel a --require given on the command line, and turn ✗ into ✓
            raise bad("ignore.requirement.unmet", "a requirement cannot be ignored: remove it from require instead")
        if not isinstance(reason, str) or not reason.strip():
            raise bad(f"ignore.{fid}", "needs a reason: a non-empty string saying why it is safe to ignore")
    both = sorted(set(error_on) & set(ignore))
    if both:
        raise bad("ignore", f"{both[0]!r} is also in error-on; a finding cannot be both")

    return Policy(
        source=source,
        requirements=tuple(require),
        error_on=frozenset(error_on),
        ignore={k: v.strip() for k, v in ignore.items()},
        min_version=min_version,
    )


def _known_id(bad, key: str, fid: str) -> None:
    if not _ID.match(fid):
        raise bad(key, f"{fid[:80]!r} is not a finding id (ids look like abi.mismatch)")
    if fid not in FINDING_IDS:
        import difflib

        close = difflib.get_close_matches(fid, sorted(FINDING_IDS), n=1)
        raise bad(key, f"unknown finding id {fid!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))


def apply_policy(report: Report, policy: Policy | None) -> Report:
    """A new report with the policy's verdicts: ignored problems become info (the reason shown),
    error-on warnings become errors. The policy's own record goes to `extra["policy"]`."""
    if policy is None:
        return report
    ignored: dict[str, str] = {}
    escalated: list[str] = []
    areas = []
    for area in report.areas:
        findings = []
        for f in area.findings:
            if f.id in policy.ignore and f.level.rank >= Level.WARNING.rank:
                reason = policy.ignore[f.id]
                note = f"ignored by {policy.source}: {reason} (was {f.level.value})"
                f = dataclasses.replace(f, level=Level.INFO, detail=f"{f.detail.rstrip()}\n{note}".lstrip("\n"))
                ignored[f.id] = reason
            elif f.id in policy.error_on and f.level is Level.WARNING:
                note = f"an error here: {policy.source} lists {f.id} in error-on"
                f = dataclasses.replace(f, level=Level.ERROR, detail=f"{f.detail.rstrip()}\n{note}".lstrip("\n"))
                escalated.append(f.id)
            findings.append(f)
        areas.append(dataclasses.replace(area, findings=findings))
    extra = dict(report.extra)
    extra["policy"] = {
        "source": policy.source,
        "ignored": ignored,
        "escalated": sorted(set(escalated)),
    }
    return dataclasses.replace(report, areas=areas, extra=extra)
