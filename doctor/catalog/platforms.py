"""Platform vocabulary: which variable the dynamic loader searches, the path-list separator,
and a library's file name. Data every layer may read (probes, fixes, emitters)."""

from __future__ import annotations


def loader_variable(system: str = "Linux") -> str:
    """The variable the dynamic loader searches at run time."""
    return {"Darwin": "DYLD_LIBRARY_PATH", "Windows": "PATH"}.get(system, "LD_LIBRARY_PATH")


def separator(system: str = "Linux") -> str:
    """The separator of path lists such as LD_LIBRARY_PATH."""
    return ";" if system == "Windows" else ":"


def library_file(stem: str, system: str = "Linux") -> str:
    """`torch_cpu` → libtorch_cpu.so / libtorch_cpu.dylib / torch_cpu.dll."""
    return {"Darwin": f"lib{stem}.dylib", "Windows": f"{stem}.dll"}.get(system, f"lib{stem}.so")
