"""Small helpers the rule modules share."""

from __future__ import annotations

import re


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"


def version_key(name: str) -> tuple[int, ...]:
    """GLIBCXX_3.4.30 → (3, 4, 30) for comparing symbol versions."""
    return tuple(int(x) for x in re.findall(r"\d+", name))


def newest(names, prefix: str) -> str | None:
    chosen = [n for n in names if n.startswith(prefix + "_")]
    return max(chosen, key=version_key) if chosen else None
