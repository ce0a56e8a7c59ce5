"""`doctor fleet`: one report for many nodes, started by torchrun, srun or mpirun (needs torch)."""

from __future__ import annotations

import click

from doctor.commands._output import Seconds, choose_format, print_report, report_options
from doctor.commands._say import say
from doctor.quoting import for_terminal


@click.command("fleet")
@click.option("--timeout", type=Seconds(1, 3600), default=60, show_default=True,
              help="Seconds each phase (joining, gathering, each collective) may take before the ranks that "
                   "did not answer are named.")
@click.option("--max-size", type=click.IntRange(1 << 10, 1 << 30), default=4 << 20, show_default=True,
              help="Largest message of the bandwidth sweep, in bytes (sizes go up ×4 from 1 KiB).")
@click.option("--iters", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Timed calls per size in the bandwidth sweep.")
@report_options
def command(timeout: float, max_size: int, iters: int, fmt: str | None, as_json: bool, verbose: int, color: str,
            strict: bool) -> int:
    """Check every node of a torch.distributed job before the job: start it like the job,

        torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST:29400 -m doctor fleet

    (or `srun doctor fleet`, `mpirun -n N doctor fleet`). One rank per node runs the probes of
    `doctor check`; rank 0 prints a table of the nodes, every fact that differs and which nodes
    hold which value, network readiness (MASTER_ADDR, *_SOCKET_IFNAME, /dev/shm, ulimit -l),
    all_reduce/all_gather/broadcast on gloo (and NCCL with GPUs) with a bandwidth table, and a
    torchfn data-parallel step. Exit codes as `check`; the other ranks print nothing unless the
    run fails, then the same one-line reason. Needs torch.
    """
    from doctor.host import Host
    from doctor.workload.fleet.run import run_fleet

    fmt = choose_format(fmt, as_json)  # a usage error before any rank waits on another
    sizes = tuple(s for s in (1 << k for k in range(10, 31, 2)) if s <= max_size)
    outcome = run_fleet(Host.from_system(), timeout, sizes, iters)
    if outcome.report is None:
        if outcome.reason:
            say(f"error: {outcome.reason}")
            # Machine output is an envelope, failures included; but only rank 0 writes stdout
            # (the ranks share it under a launcher: one JSON document, not one per rank).
            if fmt == "json" and outcome.rank == 0:
                from doctor.render.json import dumps, error_envelope

                click.echo(dumps(error_envelope("fleet", outcome.exit_code, "fleet.failed", outcome.reason)))
        return outcome.exit_code
    outcome.report.strict = strict
    if fmt == "text":
        from doctor.workload.fleet.tables import text_tables

        click.echo(for_terminal(text_tables(outcome.report)))
    code = print_report(outcome.report, fmt, False, verbose, color)
    return max(code, outcome.exit_code) if outcome.reason else code
