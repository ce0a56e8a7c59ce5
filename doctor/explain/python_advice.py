"""Advice for the ids of a failed `import torch` (which torch/ Python took, from the traceback) and
of a failed `pip install torch` (what pip found for this interpreter, from its own list)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.explain.disambiguate import torch_package
from doctor.explain.facts import Advice, MachineFacts, rule_advice
from doctor.formats import clip

if TYPE_CHECKING:  # the engine calls the advisors; they only read the Match they are given
    from doctor.explain.engine import Match


def _package(match: Match) -> str | None:
    """The torch/ Python took, as settle chose the id by it."""
    package = torch_package(match.hits)
    return clip(package, 300) if package else None


def _shadowed(match: Match, facts: MachineFacts) -> Advice:
    package = _package(match)
    if package is None:
        return rule_advice(match.rule)
    return Advice(f"`import torch` took {package}, not an installed torch", [match.rule.cause],
                  fixes.unshadow_torch(package, None), subject=package)


def _extension_missing(match: Match, facts: MachineFacts) -> Advice:
    package = _package(match)
    title = f"the installed torch in {package} has no `_C` extension this Python can load" if package else match.rule.title
    return Advice(title, [match.rule.cause, "Compare the torch/_C.* file there with what this Python loads: "
                          "python -c \"import importlib.machinery as m; print(m.EXTENSION_SUFFIXES)\"."],
                  fixes.reinstall_torch(), subject=package or "torch")


def _torch_missing(match: Match, facts: MachineFacts) -> Advice:
    if any(h.groups.get("isolated") for h in match.hits):
        return Advice("the package was built in an isolated environment, which has no torch",
                      [match.rule.cause, "The log shows an isolated build (pip's or uv's get_requires_for_build_wheel "
                                         "step, a /tmp/pip-build-env-… folder): the package's build imported torch there."],
                      fixes.build_without_isolation(), subject="build isolation")
    return Advice(match.rule.title, [match.rule.cause], fixes.install_torch_here(), subject="torch")


def _no_wheel(match: Match, facts: MachineFacts) -> Advice:
    from packaging.version import InvalidVersion, Version

    spec = clip(match.first("spec") or "torch", 120)
    listed = [v.strip() for v in (match.first("versions") or "").split(",") if v.strip() and v.strip() != "none"]
    real = [v for v in listed if not v.startswith("0.1.2")]  # PyPI's placeholders of 2017, no usable torch
    detail = [match.rule.cause]
    if "+" in spec:
        detail.append(f"{spec} carries a local tag: such builds are only on PyTorch's index (download.pytorch.org/whl/…).")
    if not real:
        detail.append("pip found no torch file at all for this interpreter" + (" but PyPI's 0.1.2 placeholders" if listed else "")
                      + ": a 32-bit Python, or a Python or platform no torch release has a wheel for.")
        title = f"no torch release has a wheel for this Python and platform ({spec} was asked)"
    else:
        detail.append(f"For this interpreter pip found torch {clip(real[0], 40)} … {clip(real[-1], 40)} "
                      f"({len(real)} releases).")
        title = f"{spec} has no wheel for this Python and platform"
        wanted = spec[len("torch"):].lstrip("=").split("+")[0] if spec.startswith("torch==") else None
        try:  # as Versions: pip reads torch==2.0 as 2.0.0
            releases = [Version(v) for v in real]
            low, high = min(releases), max(releases)
            if wanted and Version(wanted) < low:
                detail.append(f"torch {wanted} is older than every release this Python can install: an older Python "
                              "(or a newer torch) is needed.")
            elif wanted and Version(wanted) > high:
                detail.append(f"torch {wanted} is newer than every release pip found for this interpreter: that release "
                              "builds for other Python versions or platforms, or there is no such release.")
            elif wanted and Version(wanted) not in releases:
                detail.append(f"torch {wanted} is not a release: pip's list holds every one there is here.")
        except InvalidVersion:  # a log's own words: never a crash
            pass
    return Advice(title, detail, match.rule.fix, subject=spec)


PYTHON_ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "python.torch-shadowed": _shadowed,
    "python.torch-extension-missing": _extension_missing,
    "python.torch-missing": _torch_missing,
    "python.torch-no-wheel": _no_wheel,
}
