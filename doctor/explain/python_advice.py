"""Advice for the ids of a failed `import torch`: which torch/ Python took, from the traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.explain.disambiguate import torch_package
from doctor.explain.facts import Advice, MachineFacts
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
        return Advice(match.rule.title, [match.rule.cause], match.rule.fix)
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


PYTHON_ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "python.torch-shadowed": _shadowed,
    "python.torch-extension-missing": _extension_missing,
    "python.torch-missing": _torch_missing,
}
