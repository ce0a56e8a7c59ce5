"""The real torch 2.13.0 wheels for macOS arm64 and Windows x86_64, fetched once per machine.

`pip download` puts each wheel in a fixed folder outside HOME (the suite's autouse fixture
replaces HOME for every test, so ~/.cache would be empty each time; pip's own cache is
replaced too). Only what the doctor reads is extracted: torch/lib, torch/version.py,
torch/share/cmake and a few headers, into a cached tree that is a libtorch root. Nothing here
is committed. Where the registry cannot be reached the tests skip with one reason.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("TORCH_DOCTOR_TEST_WHEELS", "/var/tmp/torch-doctor-test-wheels"))
VERSION = "2.13.0"
PLATFORMS = {"macos-arm64": "macosx_14_0_arm64", "windows-x86_64": "win_amd64"}
HEADERS = (
    "torch/include/torch/headeronly/version.h",
    "torch/include/torch/csrc/api/include/torch/version.h",
    "torch/include/c10/macros/cmake_macros.h",
    "torch/include/c10/macros/Export.h",
)
TREE_MARK = ".complete"


def _wanted(name: str) -> bool:
    return (name.startswith(("torch/lib/", "torch/share/cmake/")) and not name.endswith("/")) or name in HEADERS or name == "torch/version.py"


def wheel_path(platform: str) -> Path:
    """The wheel, downloaded with pip once; skips the test when the registry is unreachable."""
    folder = CACHE / platform
    found = sorted(folder.glob(f"torch-{VERSION}-*.whl"))
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", f"torch=={VERSION}", "--no-deps", "--only-binary=:all:",
            "--platform", PLATFORMS[platform], "--python-version", "3.11", "--disable-pip-version-check", "-d", str(folder)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    found = sorted(folder.glob(f"torch-{VERSION}-*.whl"))
    if done.returncode != 0 or not found:
        pytest.skip(f"the package registry is unreachable: pip download torch=={VERSION} for {PLATFORMS[platform]} "
                    f"failed: {(done.stderr.strip().splitlines() or ['?'])[-1][:200]}")
    return found[0]


def platform_tree(platform: str) -> Path:
    """A cached libtorch root (lib/, include/, share/cmake/, version.py) built from the real wheel."""
    tree = CACHE / "trees" / platform / "torch"
    if (tree.parent / TREE_MARK).exists():
        return tree
    wheel = wheel_path(platform)
    (CACHE / "trees").mkdir(parents=True, exist_ok=True)
    with open(CACHE / "trees" / f".{platform}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes on one machine build it once
        if (tree.parent / TREE_MARK).exists():
            return tree
        staging = CACHE / "trees" / f".{platform}.staging"
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(wheel) as archive:
            for name in filter(_wanted, archive.namelist()):
                archive.extract(name, staging)
        shutil.rmtree(tree.parent, ignore_errors=True)
        staging.rename(tree.parent)
        (tree.parent / TREE_MARK).write_text(wheel.name)
    return tree


def tree_copy(platform: str, dest: Path, copy: tuple[str, ...] = ()) -> Path:
    """A tree of the platform under `dest` that a test may break: every file is a symlink to the
    cached one except those in `copy` (relative paths), which are real copies to patch."""
    source = platform_tree(platform)
    root = dest / "libtorch"
    for path in source.rglob("*"):
        rel = path.relative_to(source)
        target = root / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if str(rel) in copy:
            shutil.copyfile(path, target)
        else:
            target.symlink_to(path)
    return root
