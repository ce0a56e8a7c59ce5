"""Limits for structured text from outside (policy files, reports given to `diff`).

Python's json and tomllib parsers recurse: a file of 100,000 `[` ends in RecursionError (or,
for TOML dotted keys, in minutes of work), and a lone surrogate in a JSON string crashes the
first print. These checks run before and after parsing, in linear time and without recursion.
"""

from __future__ import annotations

from typing import Any

MAX_DEPTH = 64  # a `doctor check --json` report nests 6 deep, a policy file 2


def json_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether `[`/`{` outside strings nest deeper than `limit` (a bound on the parser's recursion)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def toml_depth_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """A bound on TOML nesting: brackets and braces outside strings and comments, plus the dots of
    dotted keys on the current line (`a.b.c = 1` nests three tables). Over-counts floats' dots,
    which is harmless at this limit."""
    depth, dots, quote = 0, 0, ""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if quote:
            if quote in ('"', '"""') and ch == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
            if ch == "\n" and len(quote) == 1:  # an unterminated basic string: the parser rejects it
                quote = ""
        elif ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif ch in "\"'":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ".":
            dots += 1
        elif ch == "\n":
            dots = 0
        if depth + dots > limit:
            return True
        i += 1
    return False


def lone_surrogate(data: Any, where: str = "") -> str | None:
    """The path of the first string (key or value) holding a lone surrogate (json.loads accepts
    "\\ud800"; no UTF-8 output can print it), or None. Iterative: the depth is already bounded,
    but a walk needs no recursion either."""
    stack: list[tuple[str, Any]] = [(where, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _has_surrogate(value):
                return path or "(top level)"
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and _has_surrogate(key):
                    return f"{path}.{ascii(key)}" if path else ascii(key)
                stack.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False

