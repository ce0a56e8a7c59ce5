"""May fetch-libtorch replace what is at --dest? Only a tree it installed itself, or — with
--force — a directory that is a libtorch tree and nothing else. Never a prefix such as
/usr/local, ~/.local, a conda env or a venv's site-packages/torch: those hold lib/ and
include/ too, and deleting them is the worst thing the doctor could do."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from doctor.errors import DoctorError
from doctor.fetch.record import MARKER, RECORD, install_problem

# What the top of an official libtorch zip holds (and our own two files).
LIBTORCH_TOP = {"lib", "include", "share", "bin", "build-version", "build-hash", RECORD, MARKER}
# Tell-tales of directories that are not a libtorch tree, to name in the refusal.
_KNOWN = [
    ("conda-meta", "a conda environment (conda-meta/)"),
    ("pyvenv.cfg", "a Python virtual environment (pyvenv.cfg)"),
    ("__init__.py", "a Python package (__init__.py), such as site-packages/torch"),
    ("site-packages", "a Python installation (site-packages/)"),
    ("python3", "a Python installation"),
    ("etc", "an installation prefix (etc/)"),
    ("sbin", "an installation prefix (sbin/)"),
    ("src", "an installation prefix or a source tree (src/)"),
    (".git", "a git checkout (.git)"),
]


def looks_like_libtorch(dest: Path) -> bool:
    """lib/libc10.*, include/torch and share/cmake/Torch are all there."""
    return (bool(glob.glob(glob.escape(str(dest / "lib")) + "/libc10.*") or glob.glob(glob.escape(str(dest / "lib")) + "/c10.*"))
            and (dest / "include" / "torch").is_dir() and (dest / "share" / "cmake" / "Torch").is_dir())


def check_replaceable(dest: Path, force: bool) -> None:
    """Raise a DoctorError naming what is at `dest` unless replacing it is safe."""
    if dest.is_symlink():
        raise DoctorError(f"{dest} is a symlink; refusing to replace it",
                          "give the real directory as --dest, or choose another one", error_id="fetch.unsafe-dest")
    if not dest.is_dir():
        raise DoctorError(f"{dest} exists and is not a directory", "choose another --dest", error_id="fetch.unsafe-dest")
    try:
        names = set(os.listdir(dest))
    except OSError as exc:
        from doctor.fetch.fsops import os_error

        raise os_error(exc, "list", dest) from exc
    problem = install_problem(dest) if names else ""
    if not problem:
        return
    others = sorted(names - LIBTORCH_TOP)
    if looks_like_libtorch(dest) and not others:
        if force:
            return
        raise DoctorError(f"{dest} holds a libtorch that fetch-libtorch cannot vouch for: {problem}",
                          "add --force to replace it, or choose another --dest", error_id="fetch.unsafe-dest")
    what = next((desc for name, desc in _KNOWN if name in names), None)
    if others:
        from doctor.formats import listing

        shown = listing(others, 6)
        found = f"it looks like {what or 'more than a libtorch tree'}: besides lib/ and include/ it holds {shown}"
    else:
        found = "it is not a libtorch tree (no lib/libc10.*, include/torch and share/cmake/Torch)"
    raise DoctorError(f"refusing to replace {dest}: {found}",
                      "nothing was touched; choose an empty or new --dest (fetch-libtorch replaces only trees it installed)",
                      error_id="fetch.unsafe-dest")
