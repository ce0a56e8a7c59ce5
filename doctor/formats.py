"""How the doctor spells numbers and cuts text: one home for each, so that a version compares,
a size reads and a long line shortens the same way in every report."""

from __future__ import annotations

import functools
import re

_DIGITS = re.compile(r"\d+")


def version_tuple(version: str) -> tuple[int, ...]:
    """"570.124.06" → (570, 124, 6); "2.6.0+cu126" → (2, 6, 0); "12.8" → (12, 8).

    The leading digits of each dot-separated part; a part that does not start with a digit ends it."""
    out = []
    for part in version.strip().split("."):
        m = _DIGITS.match(part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


@functools.lru_cache(maxsize=4096)  # the same few dozen names in every tree's libc10 (issue 19)
def symbol_version_key(name: str) -> tuple[int, ...]:
    """GLIBCXX_3.4.30 → (3, 4, 30): every number of an ELF symbol version, for comparing them."""
    return tuple(int(x) for x in _DIGITS.findall(name))


def human_bytes(n: int | None, *, compact: bool = False) -> str:
    """1536 → "1.5 KiB"; None → "unknown". compact: no trailing ".0" and up to 4 digits
    (64 MiB, 1.5 KiB, 1023 B), for tables of sizes that are mostly powers of two."""
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(size)} B"
            return f"{size:.4g} {unit}" if compact else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def clip(text: str, limit: int = 200) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def listing(items: list, shown: int) -> str:
    """The first `shown` items, comma-separated, then "and N more" for the rest."""
    more = len(items) - shown
    return ", ".join(map(str, items[:shown])) + (f" and {more} more" if more > 0 else "")


def excerpt(text: str, limit: int = 300) -> str:
    """Whitespace folded to single spaces, then clipped: a tool's output as one evidence line."""
    return clip(" ".join(text.split()), limit)
