"""Advice for the distributed ids whose log names more than the id: which ranks run which NCCL, the
store's address, the platform that has no NCCL."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.explain import advice as base
from doctor.explain.facts import Advice, MachineFacts, rule_advice

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


# A host name or an IPv4/IPv6 address, and a port: what a log's "connect to (HOST, PORT)" may put
# into the advice's command. Anything else ("PRIVATE_IP, PORT" as a reporter redacted it, or a
# hostile log's text) gets the rule's own advice.
_HOST = re.compile(r"[A-Za-z0-9:][A-Za-z0-9.:-]{0,252}")
_PORT = re.compile(r"[0-9]{1,5}")
_CONTAINER_ID = re.compile(r"[0-9a-f]{12}")  # the hostname Docker gives a container: its short ID


def _store_address(match: Match) -> tuple[str, str] | None:
    for hit in match.triggers:
        host, port = hit.groups.get("host"), hit.groups.get("port")
        if host and port and _HOST.fullmatch(host) and _PORT.fullmatch(port) and int(port) <= 65535:
            return host, port
    return None


def _store_timeout(match: Match, facts: MachineFacts) -> Advice:
    address = _store_address(match)
    if address is None:
        return rule_advice(match.rule)
    host, port = address
    detail = [match.rule.cause, f"The log shows a rank that gave up connecting to the store at {host}:{port}: nothing "
              "answered there in time (rank 0 had not created the store yet, or had died), or the network between "
              "them dropped the connection."]
    if host == "localhost" or host.startswith("127.") or host == "::1":
        detail.append(f"{host} is a loopback address: only ranks on that same machine can reach it; a job over "
                      "several nodes needs MASTER_ADDR set to an address of rank 0's node that the others reach.")
    elif _CONTAINER_ID.fullmatch(host):
        detail.append(f"{host} looks like the hostname Docker gives a container (its ID), which other machines "
                      "cannot resolve: set MASTER_ADDR to the node's IP address, or run the containers with "
                      "--network host.")
    return Advice(f"a rank could not reach the rendezvous store at {host}:{port}", detail,
                  fixes.store_reachable(host, port), subject=f"{host}:{port}")


_GLOO = ("use the gloo backend: init_process_group(\"gloo\"), or the training tool's backend setting (one GPU needs "
         "no process group at all)")


def _nccl_not_compiled(match: Match, facts: MachineFacts) -> Advice:
    """The platform the log came from (its Windows paths: torch or python.exe under a drive
    letter), else the machine the doctor runs on: on Windows or macOS there is no CUDA build to
    install, so the advice is gloo alone. On Linux the rule's words stand (a CPU build is the
    likely cause)."""
    system = base._platform(match, facts)
    if system not in ("Windows", "Darwin"):
        return rule_advice(match.rule)
    from doctor.formats import clip

    name = "Windows" if system == "Windows" else "macOS"
    detail = [match.rule.cause]
    windows = match.values("windows_path")
    if windows:
        detail.append(f"The log's paths are Windows paths ({clip(windows[0], 120)}): PyTorch publishes no NCCL for "
                      "Windows.")
    elif system == facts.system:  # the log does not say: this machine does
        detail.append(f"The doctor runs on {name}, where PyTorch publishes no NCCL.")
    fix = _GLOO + ("; for NCCL, run the job under WSL 2, whose Linux CUDA builds have it" if name == "Windows" else "")
    return Advice(f"torch for {name} has no NCCL, and the job asked for the nccl backend", detail, fix,
                  subject=name)


DIST_ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "nccl.not-compiled": _nccl_not_compiled,
    "dist.version-mismatch": _version_mismatch,
    "dist.store-timeout": _store_timeout,
}
