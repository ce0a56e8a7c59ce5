"""Advice for the distributed ids whose log names more than the id: which ranks run which NCCL."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.explain.facts import Advice, MachineFacts

if TYPE_CHECKING:  # the engine calls the advisors; they only read the Match they are given
    from doctor.explain.engine import Match


def _release(code: str) -> str:
    """NCCL's version code as a release; the code itself (its first 12 digits) when it is no
    number NCCL prints: a hostile log's 4,000-digit "version" is not echoed into the title."""
    if code.isdigit() and len(code) <= 6:
        return fixes.nccl_release(code)
    return code if len(code) <= 12 else code[:12] + "…"


def _version_mismatch(match: Match, facts: MachineFacts) -> Advice:
    ranks: dict[str, str] = {}  # rank → NCCL release, in the order the log names them
    for hit in match.hits:
        for side in ("a", "b"):
            rank, code = hit.groups.get(f"rank_{side}"), hit.groups.get(f"nccl_{side}")
            if rank and code:
                ranks.setdefault(rank, _release(code))
    releases = list(dict.fromkeys(ranks.values()))
    detail = [match.rule.cause]
    if len(releases) > 1:
        detail.append("The log names " + ", ".join(f"rank {r}: NCCL {v}" for r, v in ranks.items()) + ".")
        title = f"the ranks run different NCCL releases ({' vs '.join(releases)})"
    else:
        detail.append("The log shows a peer address NCCL could not read (family 0): a peer with another NCCL release "
                      "laid out its bootstrap message otherwise.")
        title = match.rule.title
    return Advice(title, detail, fixes.same_versions_on_every_node(releases if len(releases) > 1 else ()),
                  subject=" vs ".join(releases) or "NCCL")


DIST_ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "dist.version-mismatch": _version_mismatch,
}
