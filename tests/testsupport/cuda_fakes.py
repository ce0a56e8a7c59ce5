"""Fake CUDA toolkits: real `nvcc --version` banners (tests/fixtures/nvcc) behind a script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BANNERS = Path(__file__).resolve().parent.parent / "fixtures" / "nvcc"
# First lines of real `--version` outputs (Ubuntu 22.04/24.04, Fedora 41, Debian 12).
COMPILERS = {
    "gcc-11": "gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0",
    "gcc-12": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0",
    "gcc-13": "gcc (Ubuntu 13.2.0-23ubuntu4) 13.2.0",
    "gcc-14": "gcc (GCC) 14.2.1 20240912 (Red Hat 14.2.1-3)",
    "gcc-15": "gcc (GCC) 15.1.1 20250521 (Red Hat 15.1.1-2)",
    "clang-18": "Ubuntu clang version 18.1.3 (1ubuntu1)",
    "clang-20": "clang version 20.1.8 (Fedora 20.1.8-4.fc43)",
}


def script(path: Path, stdout: str, rc: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    quoted = stdout.rstrip().replace("'", "'\\''")
    # printf is a shell builtin: the fake PATH holds no `cat`.
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{quoted}'\nexit {rc}\n")
    path.chmod(0o755)
    return path


def toolkit(root: Path, release: str, version_json: str | None = None, headers: bool = True,
            gpu_codes: str | None = None) -> Path:
    """A toolkit tree at `root` whose bin/nvcc prints the real banner of `release` (and, given
    `gpu_codes`, that text for --list-gpu-code)."""
    script(root / "bin" / "nvcc", (BANNERS / f"{release}.txt").read_text())
    if gpu_codes is not None:
        banner = (BANNERS / f"{release}.txt").read_text().rstrip().replace("'", "'\\''")
        codes = gpu_codes.rstrip().replace("'", "'\\''")
        (root / "bin" / "nvcc").write_text(
            f"#!/bin/sh\nif [ \"$1\" = --list-gpu-code ]; then printf '%s\\n' '{codes}'; exit 0; fi\n"
            f"printf '%s\\n' '{banner}'\n")
    if headers:
        (root / "include").mkdir(exist_ok=True)
        (root / "include" / "cuda_runtime.h").write_text("#pragma once\n")
    if version_json:
        (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version_json}}))
    return root


def compiler(bin_dir: Path, name: str, banner_key: str) -> Path:
    return script(bin_dir / name, COMPILERS[banner_key] + "\nCopyright (C) Free Software Foundation, Inc.\n")


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    return tmp_path
