"""Names and URLs that come from outside, made safe for where they go.

- `safe_component`: a file name taken from a URL, a header, an archive or a lock file is used
  only when it is one plain path component (no separator, no `..`, no control bytes, at most
  255 bytes); otherwise the caller's fallback name is used.
- `redact_url`: credentials (`user:pass@`) and query strings (`?token=`) never reach the lock,
  the install record, JSON output or log lines; they are shown as `***`;
- `host_problem`: a URL's host that no connection can be made to, said before one is tried.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

NAME_MAX = 255  # bytes in one path component on Linux and macOS file systems
SECRET = "***"


def is_safe_component(name: str) -> bool:
    """Whether `name` can be used as one file name inside a directory we choose."""
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return False
    try:
        encoded = os.fsencode(name)
    except UnicodeError:
        return False
    return len(encoded) <= NAME_MAX


def safe_component(name: str | None, fallback: str) -> str:
    """`name` when it is a plain path component, else `fallback` (which the caller controls)."""
    return name if name is not None and is_safe_component(name) else fallback


def has_secrets(url: str | None) -> bool:
    """Whether `url` carries credentials or a query string (tokens ride in either)."""
    if not url:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return True
    return bool(parts.username or parts.password or "@" in parts.netloc or parts.query or parts.fragment)


def host_problem(host: str | None) -> str | None:
    """Why `host` (a URL's hostname) cannot be connected to, or None. urllib3 refuses a name
    with an empty label or one over 63 bytes (`download..pytorch.org`) only when it connects,
    with an exception nothing expects; the check is the same IDNA encoding it does."""
    if not host:
        return "it names no host"
    if host.isascii():  # a name beyond ASCII is encoded by requests first, and refused there if it must be
        try:
            host.encode("idna")
        except UnicodeError:
            return f"the host name {host!r} has an empty label or one over 63 characters"
    return None


def redact_url(url: str | None) -> str | None:
    """`url` with user information, query and fragment replaced by `***`."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
    except ValueError:  # not even parseable: cut what could be secret by plain text rules
        url = re.sub(r"(?<=//)[^/]*@", SECRET + "@", url)
        return re.sub(r"[?#].*", "?" + SECRET, url, flags=re.S)
    netloc = f"{SECRET}@{host}" if "@" in parts.netloc else host
    return urlunsplit((parts.scheme, netloc, parts.path, SECRET if parts.query else "",
                       SECRET if parts.fragment else ""))


# In free text (an exception's message, a traceback, a command line): a query string, and the
# user information of anything after `//` (up to its last `@`, as urlsplit reads it).
_SECRET_BITS = re.compile(r"\?[^\s'\")]*|(?<=//)[^/?#\s'\"]*@")


def redact_secrets(text: str) -> str:
    """`text` with every query string and `user:pass@` in it shown as `***`: for text that
    quotes URLs it does not name (a library's exception, a traceback, argv)."""
    return _SECRET_BITS.sub(lambda m: SECRET + "@" if m.group(0).endswith("@") else "?" + SECRET, text)


def redact_text(text: str, *urls: str | None) -> str:
    """`text` with every one of `urls` that holds secrets replaced by its redacted form."""
    for url in urls:
        if url and has_secrets(url):
            text = text.replace(url, redact_url(url) or SECRET)
    return text
