"""Workloads that need torch: `doctor smoke` (train a tiny model) and `doctor bench`.

torch is an optional extra, so nothing here imports it at module level; `require_torch`
turns its absence into one clear line and exit code 2.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from doctor.errors import DoctorError

INSTALL_HINT = ("pip install 'torch-doctor[torch]'  "
                "(CPU-only wheel: add --extra-index-url https://download.pytorch.org/whl/cpu)")


class MissingDependency(DoctorError):
    """torch is not importable in this Python: the command cannot run at all (exit 2)."""

    exit_code = 2
    default_id = "usage.missing-dependency"


def require_torch(command: str) -> ModuleType:
    """The torch module, or MissingDependency / DoctorError saying exactly why not."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependency(f"`doctor {command}` needs torch, which is not installed for {sys.executable}",
                                hint=INSTALL_HINT)
    try:
        import torch
    except Exception as exc:  # installed but broken: a missing libtorch_cpu.so, an ABI clash
        raise DoctorError(f"torch is installed but does not import: {first_line(exc)}",
                          hint="run `doctor check` to see why, or reinstall: " + INSTALL_HINT,
                          error_id="env.torch-broken") from exc
    return torch


def require_module(name: str, extra: str, command: str) -> ModuleType:
    """An optional dependency (matplotlib for --plot), or MissingDependency (exit 2) with the extra to install."""
    if importlib.util.find_spec(name) is None:
        raise MissingDependency(f"`doctor {command}` needs {name} for this option, and it is not installed",
                                hint=f"pip install 'torch-doctor[{extra}]'")
    return importlib.import_module(name)


def first_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, cut to `limit`: a device error as one report line."""
    text = str(exc).strip()
    line = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
    return line if len(line) <= limit else line[:limit - 3] + "..."
