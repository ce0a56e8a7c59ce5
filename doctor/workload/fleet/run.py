"""One rank's part in `doctor fleet`: read the launch, gather, join, compare, test collectives and
a data-parallel step; rank 0 builds the report. Every phase is bounded by `timeout`."""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from typing import Any

from doctor.errors import UsageError
from doctor.host import Host
from doctor.model import Report
from doctor.record import record
from doctor.workload import first_line, require_torch
from doctor.workload.fleet.collectives import DEFAULT_SIZES, check_correct, latency, nccl_plan, sweep
from doctor.workload.fleet.gather import FleetAbort, all_gather, join, node_payload, open_store
from doctor.workload.fleet.launcher import read_launch
from doctor.workload.fleet.network import node_network, reach
from doctor.workload.fleet.training import data_parallel_smoke

NO_LAUNCHER_HINT = ("torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST:29400 -m doctor fleet"
                    "  (or: srun doctor fleet, mpirun -n N doctor fleet)")


@record
class Outcome:
    rank: int
    report: Report | None  # rank 0's report; None on the other ranks
    exit_code: int
    reason: str = ""  # the one line every rank prints when the run failed


def run_fleet(host: Host, timeout: float, sizes: tuple[int, ...] = DEFAULT_SIZES, iters: int = 5) -> Outcome:
    launch = read_launch(host.env)
    if launch is None:
        raise UsageError("`doctor fleet` was not started by a launcher: no RANK/WORLD_SIZE (torchrun), "
                         "SLURM_PROCID/SLURM_NTASKS (srun), OMPI_COMM_WORLD_* (mpirun) or PMI_* in the environment",
                         NO_LAUNCHER_HINT)
    if "TORCH_CPP_LOG_LEVEL" not in host.env:
        # torch's C++ logger prints every failed attempt to reach the store with a 37-frame
        # backtrace, burying the one line each rank prints; the exception keeps the reason.
        # Read when torch loads; a level the user chose is kept.
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    torch = require_torch("fleet")
    dist = torch.distributed
    launch_facts = dataclasses.asdict(launch)
    network = None
    if launch.gatherer:
        network = node_network(host, launch.master_addr, launch.master_port)
        if not (launch.rank == 0 and not launch.agent_store):  # rank 0 hosts the store itself
            network["port"] = reach(launch.master_addr, launch.master_port, min(timeout, 10.0))
    payload = node_payload(host, launch, network or {})
    payload["nccl"] = nccl_plan(torch)
    try:
        store = open_store(torch, launch, timeout, host.system)
        join(store, launch, payload["host"], timeout)
        try:
            dist.init_process_group("gloo", store=dist.PrefixStore("doctor-fleet/pg", store), rank=launch.rank,
                                    world_size=launch.world_size, timeout=timedelta(seconds=timeout))
        except Exception as exc:
            raise FleetAbort(f"rank {launch.rank}: the gloo process group did not form within {timeout:g} s: {first_line(exc)}") from None
        try:
            return _run_group(torch, launch, launch_facts, payload, sizes, iters)
        finally:
            dist.destroy_process_group()
    except FleetAbort as abort:
        reason = str(abort)
        if launch.rank == 0:
            from doctor.diagnose.fleet import aborted_report

            return Outcome(0, aborted_report(launch_facts, reason), 1, reason)
        return Outcome(launch.rank, None, 1, reason)


def _run_group(torch: Any, launch, launch_facts: dict, payload: dict, sizes: tuple[int, ...], iters: int) -> Outcome:
    dist = torch.distributed
    phase = "gather"
    try:
        payloads = all_gather(torch, payload, launch.world_size)
        phase = "gloo collectives"
        mine: dict[str, Any] = {"rank": launch.rank, "gloo": check_correct(torch, None, "cpu"), "nccl": {}}
        gloo = {"sweep": sweep(torch, None, "cpu", sizes, iters), "latency": latency(torch, None, "cpu")}
        nccl: dict[str, Any] = {}
        why_not = [f"rank {p['rank']}: {p['nccl'][1]}" for p in payloads if p["nccl"][1]]
        if why_not:
            nccl["skipped"] = why_not[0] + (f" (and {len(why_not) - 1} more rank{'s' * (len(why_not) > 2)})" if len(why_not) > 1 else "")
        else:
            phase = "nccl collectives"
            torch.cuda.set_device(launch.local_rank % torch.cuda.device_count())
            group = dist.new_group(backend="nccl")
            mine["nccl"] = check_correct(torch, group, "cuda")
            nccl = {"sweep": sweep(torch, group, "cuda", sizes, iters), "latency": latency(torch, group, "cuda")}
        phase = "data-parallel training"
        mine["training"] = data_parallel_smoke(torch)
        phase = "collecting results"
        results = all_gather(torch, mine, launch.world_size)
        verdict: list[Any] = [None]
        if launch.rank == 0:
            from doctor.diagnose.fleet import fleet_report

            report = fleet_report(launch_facts, payloads, results, gloo, nccl)
            verdict = [(report.exit_code(), "")]
        dist.broadcast_object_list(verdict, src=0)
        code = verdict[0][0]
        return Outcome(launch.rank, report if launch.rank == 0 else None, code,
                       "" if code == 0 else "doctor fleet found problems: see rank 0's report")
    except FleetAbort:
        raise
    except Exception as exc:  # a rank died or a collective timed out: name the phase
        raise FleetAbort(f"rank {launch.rank}: {phase} failed: {first_line(exc)}") from None


