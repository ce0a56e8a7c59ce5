"""`doctor smoke`: train a tiny torchfn model on each device; one verdict per device."""

from __future__ import annotations

import click

from doctor.commands._output import print_report, report_options
from doctor.workload.devices import CHOICES


@click.command("smoke")
@click.option("--device", type=click.Choice(CHOICES), default="all", show_default=True,
              help="Where to train: one kind of device, or every one this torch can use.")
@click.option("--steps", type=click.IntRange(5, 100_000), default=60, show_default=True,
              help="Training steps per device.")
@report_options
def command(device: str, steps: int, fmt: str | None, as_json: bool, verbose: int, color: str, strict: bool) -> int:
    """Train a small MLP with torchfn on each device: the loss must fall, gradients stay
    finite, and tensors move between devices intact. Needs torch."""
    from doctor.host import Host
    from doctor.workload.smoke import smoke_report

    report = smoke_report(device, steps, env=Host.from_system().env)
    report.strict = strict
    return print_report(report, fmt, as_json, verbose, color)
