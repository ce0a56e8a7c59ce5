"""Which platform a libtorch tree is for, told from its files (not from the machine running the
doctor), and the platform's loader facts for it: CI on Linux can check a tree it ships for macOS
or Windows."""

from __future__ import annotations

import os
from pathlib import PurePath

from doctor.host import Host
from doctor.record import record

MARKERS = {"macos": ("libc10.dylib", "libtorch.dylib"), "windows": ("c10.dll", "torch.dll"), "linux": ("libc10.so", "libtorch.so")}


def tree_system(host: Host, lib_dir: str) -> str | None:
    """'Darwin', 'Windows' or 'Linux' from the libraries in lib_dir; None when none is there."""
    if any(host.exists(os.path.join(lib_dir, m)) for m in MARKERS["linux"]):
        return "Linux"  # the common case, without loading the Windows path rules
    from doctor.probe.platform_win import win_path

    for name, system in (("macos", "Darwin"), ("windows", "Windows")):
        if any(host.exists(PurePath(win_path(host, lib_dir)) / m) for m in MARKERS[name]):
            return system
    return None


@record
class PlatformTreeFacts:
    """A macOS or Windows libtorch tree, read from its Mach-O / PE files."""
    system: str  # the tree's platform: "Darwin" | "Windows"
    host_system: str  # the machine running the doctor
    mac: object | None = None  # MacTreeFacts
    win: object | None = None  # WinTreeFacts
    apple: object | None = None  # AppleFacts of this Mac (sw_vers, sysctl), None elsewhere
    tools: object | None = None  # MacTools / WinTools of the running machine when it is that platform

    @property
    def on_this_machine(self) -> bool:
        return self.system == self.host_system


def detect_platform_tree(host: Host, lib_dir: str | None, apple=None) -> PlatformTreeFacts | None:
    """Loader facts of a macOS or Windows tree; None for a Linux tree (probe/loader.py does those)."""
    if lib_dir is None:
        return None
    system = tree_system(host, lib_dir)
    if system == "Darwin":
        from doctor.probe.platform_mac import detect_mac_tree

        from doctor.probe.platform_mac import detect_mac_tools

        tools = detect_mac_tools(host) if host.system == "Darwin" else None
        return PlatformTreeFacts(system, host.system, mac=detect_mac_tree(host, lib_dir), apple=apple, tools=tools)
    if system == "Windows":
        from doctor.probe.platform_win import detect_win_tree

        from doctor.probe.platform_win import detect_win_tools

        tools = detect_win_tools(host) if host.system == "Windows" else None
        return PlatformTreeFacts(system, host.system, win=detect_win_tree(host, lib_dir), tools=tools)
    return None
