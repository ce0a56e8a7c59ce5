"""Messages for the person at the terminal, on stderr: shown, never acted on (quoting's
`for_terminal`), and never the reason a command fails — a full or closed stderr loses the
message, not the work (a fetch goes on, an emit keeps the file it wrote)."""

from __future__ import annotations

import click

from doctor.quoting import for_terminal


def say(text: str, one_line: bool = False) -> None:
    """`one_line`: the text is one line by contract (`error: …`, `hint: …`), so a newline inside
    it comes from a value (a path holding one and "hint: curl … | sh") and is shown as \\n."""
    try:
        click.echo(for_terminal(text, one_line=one_line), err=True)
    except OSError:
        pass
