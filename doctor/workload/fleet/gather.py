"""Joining and gathering: every rank checks in at the rendezvous store, rank 0 waits at most
`timeout` seconds and names the ranks (and hosts) that never came; then one `doctor check` report
per node (its LOCAL_RANK 0 ran the probes) reaches every rank through all_gather_object over gloo.
"""

from __future__ import annotations

import json
import socket
import time
from datetime import timedelta
from typing import Any

from doctor.formats import listing
from doctor.host import Host
from doctor.workload.fleet.launcher import Launch

VERDICT_KEY = "doctor-fleet/verdict"
POLL = 0.05


class FleetAbort(Exception):
    """A phase could not complete: one line every rank prints, the same on all of them."""


def node_payload(host: Host, launch: Launch, network: dict[str, Any]) -> dict[str, Any]:
    """What this rank contributes: its identity, and on the node's gatherer the `doctor check`
    report (the same probes, the same JSON) and the network facts."""
    payload: dict[str, Any] = {"rank": launch.rank, "local_rank": launch.local_rank, "node_rank": launch.node_rank,
                               "host": socket.gethostname(), "report": None, "network": None}
    if launch.gatherer:
        from doctor.check import run_check
        from doctor.render.json import as_dict

        payload["report"] = as_dict(run_check(host))
        payload["network"] = network
    return payload


def open_store(torch: Any, launch: Launch, timeout: float, system: str) -> Any:
    """The rendezvous store: torchrun's agent store when it serves one (as env:// does), else
    rank 0 hosts a TCPStore at MASTER_ADDR:MASTER_PORT (srun, mpirun, static torchrun). On
    Windows the store is the old, libuv-free server: torch's Windows builds have no libuv and a
    TCPStore asks for it unless told otherwise (findings/dist.no-libuv)."""
    dist = torch.distributed
    libuv = {"use_libuv": False} if system == "Windows" else {}  # for the server and the clients alike
    try:
        if launch.agent_store:
            store = dist.TCPStore(launch.master_addr, launch.master_port, None, False,
                                  timedelta(seconds=timeout), **libuv)
            return dist.PrefixStore(f"/worker/attempt_{launch.restart_count}/doctor-fleet", store)
        return dist.TCPStore(launch.master_addr, launch.master_port, None, launch.rank == 0,
                             timedelta(seconds=timeout), wait_for_workers=False, **libuv)
    except Exception as exc:  # DistNetworkError, RuntimeError: the first line says why
        what = "host the rendezvous store at" if launch.rank == 0 and not launch.agent_store else "reach the rendezvous store at"
        raise FleetAbort(f"rank {launch.rank} could not {what} {launch.master_addr}:{launch.master_port} "
                         f"within {timeout:g} s: {_first_line(exc)}") from None


def join(store: Any, launch: Launch, host_name: str, timeout: float) -> dict[int, str]:
    """Check in; rank 0 waits for every rank and publishes the verdict, the others read it.
    Returns rank → host for all ranks, or raises FleetAbort naming the missing ones."""
    store.set(f"doctor-fleet/join/{launch.rank}", json.dumps({"host": host_name, "node_rank": launch.node_rank}))
    keys = [f"doctor-fleet/join/{r}" for r in range(launch.world_size)]
    if launch.rank == 0:
        deadline = time.monotonic() + timeout
        while not store.check(keys) and time.monotonic() < deadline:
            time.sleep(POLL)
        present = {r: json.loads(store.get(k))["host"] for r, k in enumerate(keys) if store.check([k])}
        missing = [r for r in range(launch.world_size) if r not in present]
        verdict = {"ok": not missing, "present": present,
                   "reason": missing_reason(missing, launch.world_size, timeout, expected_hosts=None)}
        store.set(VERDICT_KEY, json.dumps(verdict))
    else:
        try:
            store.wait([VERDICT_KEY], timedelta(seconds=2 * timeout + 5))
        except Exception as exc:
            raise FleetAbort(f"rank {launch.rank}: rank 0 gave no verdict within {2 * timeout + 5:g} s: {_first_line(exc)}") from None
        verdict = json.loads(store.get(VERDICT_KEY))
    if not verdict["ok"]:
        raise FleetAbort(verdict["reason"])
    return {int(r): h for r, h in verdict["present"].items()}


def missing_reason(missing: list[int], world_size: int, timeout: float, expected_hosts: list[str] | None) -> str:
    if not missing:
        return ""
    shown = listing(missing, 20)
    text = f"{len(missing)} of {world_size} ranks did not join within {timeout:g} s: rank{'s' * (len(missing) > 1)} {shown}"
    if expected_hosts:
        text += f" (hosts {', '.join(expected_hosts)})"
    return text


def all_gather(torch: Any, payload: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    out: list[Any] = [None] * world_size
    torch.distributed.all_gather_object(out, payload)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
