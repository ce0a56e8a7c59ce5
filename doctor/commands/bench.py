"""`doctor bench`: GEMM against an estimated peak, dispatch overhead, eager vs compiled."""

from __future__ import annotations

import click

from doctor.commands._output import print_report, report_options
from doctor.workload.devices import CHOICES


@click.command("bench")
@click.option("--device", type=click.Choice(CHOICES), default="all", show_default=True,
              help="Which devices to measure.")
@click.option("--quick", is_flag=True, help="Fewer sizes and shorter timings, for CI (with --no-compile: a few seconds).")
@click.option("--compile/--no-compile", "torch_compile", default=True, show_default=True,
              help="Include torch.compile in the eager-vs-compiled section (compiling takes seconds).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), default=None,
              metavar="FILE.png", help="Also draw the GEMM sweep and the eager/compiled bars to FILE.png (needs matplotlib: the `plot` extra).")
@report_options
def command(device: str, quick: bool, torch_compile: bool, plot_path: str | None, fmt: str | None, as_json: bool,
            verbose: int, color: str, strict: bool) -> int:
    """Measure GEMM GFLOP/s against this machine's estimated peak, the cost of one tiny op, and the
    512-256-128-2 MLP eager vs torch.compile vs TorchScript. Needs torch."""
    from doctor.workload import require_module
    from doctor.workload.bench import bench_report, plot

    if plot_path is not None:
        require_module("matplotlib", "plot", "bench --plot")  # before minutes of measuring, not after
    report = bench_report(device, quick, torch_compile)
    report.strict = strict
    if plot_path is not None:
        import io

        from doctor.host import Host

        png = io.BytesIO()
        plot(report, png)  # the renderer returns bytes; the command layer decides where they go
        Host.from_system().write_atomic(plot_path, png.getvalue(), follow=True, doing="write the plot to",
                                        instead="give a writable path ending in .png")
        report.facts["plot"] = plot_path
    return print_report(report, fmt, as_json, verbose, color)
