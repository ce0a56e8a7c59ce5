"""Small helpers the rule modules share."""

from __future__ import annotations

from doctor.formats import symbol_version_key as version_key


def newest(names, prefix: str) -> str | None:
    chosen = [n for n in names if n.startswith(prefix + "_")]
    return max(chosen, key=version_key) if chosen else None
