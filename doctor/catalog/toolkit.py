"""The newest host compiler each CUDA release's nvcc accepts, as data.

nvcc enforces these limits in `include/crt/host_config.h` ("#error -- unsupported GNU version!
gcc versions later than N are not supported!"); NVIDIA's Linux installation guide for each
release lists the same majors in its "Supported Linux distributions" table. Sources per row
are in docs/cuda.md; tests/cuda/test_toolkit_catalog.py checks every row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HostCompilerLimit:
    cuda: str  # "12.4": the CUDA release (major.minor)
    gcc_max: int  # newest GCC major nvcc accepts
    clang_max: int  # newest Clang major nvcc accepts
    source: str  # NVIDIA's installation guide for that release


def _guide(version: str) -> str:
    return f"https://docs.nvidia.com/cuda/archive/{version}/cuda-installation-guide-linux/"


HOST_COMPILER_LIMITS: tuple[HostCompilerLimit, ...] = (
    HostCompilerLimit("11.8", 11, 14, _guide("11.8.0")),
    HostCompilerLimit("12.0", 12, 14, _guide("12.0.0")),
    HostCompilerLimit("12.1", 12, 15, _guide("12.1.0")),
    HostCompilerLimit("12.2", 12, 15, _guide("12.2.0")),
    HostCompilerLimit("12.3", 12, 16, _guide("12.3.0")),
    HostCompilerLimit("12.4", 13, 17, _guide("12.4.0")),
    HostCompilerLimit("12.5", 13, 17, _guide("12.5.0")),
    HostCompilerLimit("12.6", 13, 18, _guide("12.6.0")),
    HostCompilerLimit("12.8", 14, 19, _guide("12.8.0")),
    HostCompilerLimit("12.9", 14, 19, _guide("12.9.0")),
    HostCompilerLimit("13.0", 15, 20, _guide("13.0.0")),
)


def major_minor(version: str | None) -> tuple[int, int] | None:
    """(12, 4) from "12.4", "12.4.131" or "V12.4.131"; None when it is not a version."""
    if not version:
        return None
    m = re.match(r"v?(\d+)\.(\d+)", version.strip(), re.I)
    return (int(m.group(1)), int(m.group(2))) if m else None


def host_compiler_limit(cuda: str | None) -> HostCompilerLimit | None:
    """The row for this CUDA release; an unlisted minor (12.7) takes the newest listed row of the
    same major below it, because nvcc only ever raises its limits within a major."""
    want = major_minor(cuda)
    if want is None:
        return None
    rows = [r for r in HOST_COMPILER_LIMITS if (k := major_minor(r.cuda)) and k[0] == want[0] and k <= want]
    return max(rows, key=lambda r: major_minor(r.cuda), default=None)


def newest_cuda_for(kind: str, major: int) -> str | None:
    """The oldest listed CUDA release whose nvcc accepts this compiler major (for the fix text)."""
    for row in HOST_COMPILER_LIMITS:
        if (row.gcc_max if kind == "gcc" else row.clang_max) >= major:
            return row.cuda
    return None
