"""Messages for the person at the terminal, on stderr: shown, never acted on (quoting's
`for_terminal`), and never the reason a command fails — a full or closed stderr loses the
message, not the work (a fetch goes on, an emit keeps the file it wrote)."""

from __future__ import annotations

import click

from doctor.quoting import for_terminal


def say(text: str, one_line: bool = True) -> None:
    """A message is one line (`error: …`, `hint: …`, `note: …`), so a newline inside it comes from
    a value (a path holding one and "hint: curl … | sh") and is shown as \\n. `one_line=False`
    for a text made of lines, each of which quotes its value itself (fetch's summary)."""
    try:
        click.echo(for_terminal(text, one_line=one_line), err=True)
    except OSError:
        pass
