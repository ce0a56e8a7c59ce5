"""Messages for the person at the terminal, on stderr: shown, never acted on (quoting's
`for_terminal`), and never the reason a command fails — a full or closed stderr loses the
message, not the work (a fetch goes on, an emit keeps the file it wrote)."""

from __future__ import annotations

import click

from doctor.quoting import for_terminal


def say(text: str) -> None:
    try:
        click.echo(for_terminal(text), err=True)
    except OSError:
        pass
