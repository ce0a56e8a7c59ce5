"""Small helpers the rule modules share."""

from __future__ import annotations

from doctor.formats import symbol_version_key as version_key


def newest(names, prefix: str) -> str | None:
    chosen = [n for n in names if n.startswith(prefix + "_")]
    return max(chosen, key=version_key) if chosen else None


# What a path that should be a directory is instead, as a message says it (Host.path_kind's words).
NOT_A_DIRECTORY = {
    "missing": "does not exist",
    "file": "is a file, not a directory",
    "fifo": "is a named pipe, not a directory",
    "socket": "is a socket, not a directory",
    "device": "is a device, not a directory",
    "loop": "is a symbolic link loop",
    "dangling": "is a symbolic link to a path that does not exist",
    "denied": "cannot be reached (permission denied)",
    "too-long": "is too long a path for this system",
    "under-file": "does not exist (a file stands where one of its parent folders should be)",
}


def not_a_directory(kind: str) -> str:
    return NOT_A_DIRECTORY.get(kind, "is not a directory")


_NOT_A_FILE = {"directory": "a directory", "fifo": "a named pipe", "socket": "a socket", "device": "a device"}


def not_a_file(kind: str, wanted: str | None = None) -> str:
    """What a path that should be a file is instead ("is a named pipe, not a zip file"), in the
    words above for the kinds a file and a directory share; `wanted` names what was expected."""
    if kind in _NOT_A_FILE:
        return f"is {_NOT_A_FILE[kind]}" + (f", not {wanted}" if wanted else "")
    return "no such file" if kind == "missing" else NOT_A_DIRECTORY.get(kind, "no such file")
