"""One module per command, each defining a click command named `command`."""
