"""Pure parsers for the version files found in torch wheels and libtorch trees."""

from __future__ import annotations

import ast
import re


def parse_version_py(text: str) -> dict[str, str | bool | None]:
    """`torch/version.py` as data, without executing it: __version__, cuda, hip, rocm, xpu, git_version, debug."""
    out: dict[str, str | bool | None] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: NUL bytes; the others: deep nesting
        return out
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
                if isinstance(value.value, (str, bool)) or value.value is None:
                    out[target.id] = value.value
    return out


_DEFINE = re.compile(r"#define\s+TORCH_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)")


def parse_version_h(text: str) -> str | None:
    """"2.13.0" from TORCH_VERSION_MAJOR/MINOR/PATCH defines."""
    parts = dict(_DEFINE.findall(text))
    if {"MAJOR", "MINOR", "PATCH"} <= parts.keys():
        return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    return None


def parse_config_version_cmake(text: str) -> str | None:
    m = re.search(r'set\(\s*PACKAGE_VERSION\s+"([^"]+)"\s*\)', text)
    return m.group(1) if m else None


def parse_build_version(text: str) -> str | None:
    value = text.strip()
    return value if re.fullmatch(r"\d+\.\d+(\.\d+)?([a-z0-9.]*)?(\+[\w.]+)?", value) else None


# What a torch wheel and a libtorch tree say ("2.13.0", "2.13.0+cpu"): its release read here,
# without packaging, whose import and version pattern were ~4 % of a plain `check` (issue 19).
# Exactly what packaging gives for these texts (tests/probe/test_parsers.py, packaging as the
# oracle); anything else (pre-releases, leading zeros, `v`, longer labels) goes to packaging.
_PLAIN_RELEASE = re.compile(r"((?:0|[1-9][0-9]{0,5})(?:\.(?:0|[1-9][0-9]{0,5})){0,3})(?:\+[a-z0-9]{1,64})?")


def pep440_release(text: str) -> str | None:
    """The release number ("2.14.0") of a PEP 440 version ("2.14.0.dev20260101+cpu"), or None
    when the text is not one. Everything after the probe compares release numbers."""
    if plain := _PLAIN_RELEASE.fullmatch(text):
        return plain.group(1)
    from packaging.version import InvalidVersion, Version

    if len(text) > 100:
        return None
    try:
        v = Version(text)
    except (InvalidVersion, ValueError):  # ValueError: an integer part of > 4300 digits
        return None
    if len(v.release) > 4 or any(part > 10**6 for part in v.release):
        return None
    return ".".join(str(part) for part in v.release)


def split_local(version: str) -> tuple[str, str | None]:
    """"2.13.0+cu130" → ("2.13.0", "cu130"); "2.13.0" → ("2.13.0", None)."""
    base, _, local = version.partition("+")
    return base, (local or None)


def parse_torch_config_cmake(text: str) -> dict[str, str | int | None]:
    """ABI flag (≤ 2.7) and the C++ standard TorchConfig.cmake asks for."""
    abi = re.search(r"-D_GLIBCXX_USE_CXX11_ABI=([01])", text)
    std = re.search(r"CXX_STANDARD\s+(\d+)", text) or re.search(r"cxx_std_(\d+)", text)
    return {
        "abi_flag": abi.group(1) if abi else None,
        "cxx_standard": int(std.group(1)) if std else None,
    }


def parse_os_release(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out
