"""Requirements a CI job states (`--require`, `[tool.doctor] require`), checked against facts.

Grammar: `libtorch<spec>` / `torch<spec>` with a PEP 440 specifier (`libtorch>=2.5,<2.10`,
`torch==2.13.*`), `abi=cxx11|pre-cxx11`, `variant=<cpu|cuXYZ|rocmX.Y>`, `gpu`, `cuda`.
"""

from __future__ import annotations

import re

from doctor import fixes
from doctor.catalog.releases import ABIS, PRE_CXX11_LAST, is_variant, newest_with, versions
from doctor.errors import UsageError
from doctor.model import Evidence, Finding, Level
from doctor.record import record

_VERSIONED = re.compile(r"^\s*(libtorch|torch)\s*([<>=!~].*)$")
_KEYED = re.compile(r"^\s*(abi|variant)\s*=\s*(\S+)\s*$")


@record(frozen=True)
class Requirement:
    """One requirement (--require or policy), parsed."""
    text: str
    kind: str  # "libtorch" | "torch" | "abi" | "variant" | "gpu" | "cuda"
    value: str = ""  # the specifier or the wanted value


def parse_requirement(text: str) -> Requirement:
    """One requirement, or UsageError naming it and the accepted forms."""
    stripped = text.strip()
    if stripped in ("gpu", "cuda"):
        return Requirement(stripped, stripped)
    if m := _VERSIONED.match(stripped):
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        from packaging.version import Version

        spec = m.group(2).replace(" ", "")
        try:
            # Trial comparison: packaging parses the specifier's version lazily, and a number
            # past Python's 4300-digit int() limit fails only then.
            SpecifierSet(spec).contains(Version("0"), prereleases=True)
            if len(spec) > 200:
                raise InvalidSpecifier(spec)
        except (InvalidSpecifier, ValueError):
            raise UsageError(f"malformed requirement {text[:100]!r}: {m.group(2)[:100]!r} is not a version specifier",
                             "write e.g. 'libtorch>=2.5,<2.10' or 'torch==2.13.*'") from None
        return Requirement(stripped, m.group(1), m.group(2).replace(" ", ""))
    if m := _KEYED.match(stripped):
        key, value = m.groups()
        if key == "abi" and value not in ABIS:
            raise UsageError(f"malformed requirement {text!r}: abi must be {' or '.join(ABIS)}")
        if key == "variant" and not is_variant(value):
            raise UsageError(f"malformed requirement {text!r}: variant must look like cpu, cu128 or rocm6.4")
        return Requirement(stripped, key, value)
    raise UsageError(
        f"malformed requirement {text!r}",
        "accepted: 'libtorch>=2.5', 'torch==2.13.*', 'abi=cxx11', 'abi=pre-cxx11', 'variant=cu128', 'gpu', 'cuda'",
    )


def evaluate(req: Requirement, facts: dict) -> Finding | None:
    """A failed-requirement finding, or None when it is met."""
    met, observed, evidence = _check(req, facts)
    if met:
        return None
    return Finding(
        id="requirement.unmet",
        level=Level.ERROR,
        title=f"requirement not met: {req.text}",
        detail=f"found: {observed}",
        fix=_fix(req),
        area="requirements",
        evidence=evidence,
        subject=req.text,
    )


def _check(req: Requirement, facts: dict) -> tuple[bool, str, list[Evidence]]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    active = facts["libtorch"].active_install
    if req.kind in ("libtorch", "torch"):
        if req.kind == "libtorch":
            version, evidence = (_full_version(active), active.evidence[:1]) if active else (None, [])
        else:
            torch = facts.get("python_torch")
            # The full version with its local label ("2.13.0+cpu"): PEP 440 ignores the label
            # for '==2.13.0' and compares it for '==2.13.0+cpu', which then must match.
            version, evidence = (torch.version or torch.base_version, torch.evidence) if torch else (None, [])
        if version is None:
            return False, f"no {req.kind}", evidence
        try:
            # A pre-release installed on purpose (2.14.0.dev...) is judged by its number.
            ok = SpecifierSet(req.value).contains(Version(version), prereleases=True)
        except ValueError:  # InvalidVersion, or a number past Python's int() digit limit
            return False, f"{version[:100]} (not a PEP 440 version)", evidence
        return ok, version, evidence
    if req.kind in ("abi", "variant"):
        if active is None:
            return False, "no libtorch", []
        value = getattr(active, req.kind)
        return value == req.value, str(value or "unknown"), active.evidence
    # gpu / cuda: judged by the GPU area's rules
    from doctor.diagnose import gpu as gpu_rules

    gpu = facts.get("gpu")
    if req.kind == "gpu":
        ok, why = gpu_rules.meets_gpu(gpu)
    else:
        ok, why = gpu_rules.meets_cuda(gpu, active)
    return ok, why, []


def _full_version(active) -> str | None:
    """The active libtorch's version with the local label its version file states ("2.13.0+cpu");
    a variant guessed from library names is not a label and is left out."""
    if active.version is None:
        return None
    for source in active.version_sources:
        base, _, local = source.version.partition("+")
        if local and base == active.version:
            return source.version
    return active.version


def _fix(req: Requirement) -> str:
    """A command that works when pasted: each names a version that was published with what it asks."""
    if req.kind == "libtorch":
        from packaging.specifiers import SpecifierSet

        spec = SpecifierSet(req.value)
        matching = [v for v in versions() if spec.contains(v, prereleases=True)]
        if not matching:
            return f"no published libtorch matches {req.value}: doctor fetch-libtorch --version <X.Y.Z> --unlisted"
        return f"{fixes.fetch(matching[-1])}  (then eval \"$(doctor emit setenv)\")"
    if req.kind == "torch":
        label = re.search(r"\+([a-z0-9.]+)$", req.value)
        if label and is_variant(label.group(1)):  # a local label (+cu128) is on that index only
            return f"pip install 'torch{req.value}' --index-url {fixes.TORCH_INDEX}/{label.group(1)}"
        return f"pip install 'torch{req.value}'  (CPU wheels: --index-url {fixes.TORCH_INDEX}/cpu)"
    if req.kind == "abi":
        if req.value == "pre-cxx11":
            return (f"{fixes.fetch(newest_with(series=PRE_CXX11_LAST))} --abi pre-cxx11  "
                    f"(no libtorch after {PRE_CXX11_LAST} was published with the pre-cxx11 ABI)")
        return "doctor fetch-libtorch --abi cxx11"
    if req.kind == "variant":
        version = newest_with(req.value)
        if version is None:
            return f"{fixes.fetch(variant=req.value)}  (no release in the doctor's table publishes {req.value}; add --unlisted)"
        return fixes.fetch(version, req.value)
    return "run on a machine with a working GPU driver; see the GPU area above"
