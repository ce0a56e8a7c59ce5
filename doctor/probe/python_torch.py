"""The Python torch, found without importing it: its version.py read as text."""

from __future__ import annotations

import re

from dataclasses import field
from pathlib import PurePath

from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.versions import parse_version_py, pep440_release, split_local
from doctor.record import record


@record
class PythonTorch:
    """The torch of the Python environment, read from its files."""
    location: str  # .../site-packages/torch
    version: str  # "2.13.0+cpu"
    base_version: str | None  # "2.13.0"; None when __version__ is not a PEP 440 version
    variant: str | None  # "cpu", "cu130", "rocm6.4"; None when the version has no local part
    cuda: str | None
    hip: str | None
    git_version: str | None
    debug: bool
    libtorch_root: str | None  # the wheel's bundled libtorch tree (its lib/include/share)
    python: str
    evidence: list[Evidence] = field(default_factory=list)


def detect_python_torch(host: Host) -> PythonTorch | None:
    """The first `torch` package on the interpreter's sys.path, as `import torch` would find it."""
    for entry in host.sys_path:
        if not entry:
            continue
        location = str(PurePath(entry) / "torch")
        text = host.read_text(PurePath(location) / "version.py")
        if text is None:
            continue
        info = parse_version_py(text)
        version = info.get("__version__")
        if not isinstance(version, str):
            continue
        _, local = split_local(version)
        base = pep440_release(version)  # "2.13.0abc" or 5000 digits: None, reported by diagnose
        if local and not re.fullmatch(r"[a-z0-9.]{1,32}", local):
            local = None
        cuda = info.get("cuda") if isinstance(info.get("cuda"), str) else None
        hip = info.get("hip") if isinstance(info.get("hip"), str) else None
        variant = local or variant_from(cuda, hip)
        has_tree = host.is_dir(PurePath(location) / "lib") and host.is_dir(PurePath(location) / "include")
        return PythonTorch(
            location=location,
            version=version,
            base_version=base,
            variant=variant,
            cuda=cuda,
            hip=hip,
            git_version=info.get("git_version") if isinstance(info.get("git_version"), str) else None,
            debug=bool(info.get("debug")),
            libtorch_root=location if has_tree else None,
            python=host.python,
            evidence=[Evidence("file", f"{location}/version.py", f"__version__ = {version!r}, cuda = {cuda!r}, hip = {hip!r}")],
        )
    return None


def variant_from(cuda: str | None, hip: str | None) -> str:
    if cuda:
        return "cu" + cuda.replace(".", "")[:3]
    if hip:
        return "rocm" + ".".join(hip.split(".")[:2])
    return "cpu"
