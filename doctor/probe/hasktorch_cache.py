"""Hasktorch's libtorch cache, the one place that knows its layout.

libtorch-ffi's Setup.hs (hasktorch/hasktorch at 7395e0b1d246ef0a58a0590fff67dffd4e884414):

    base    = $LIBTORCH_HOME, else getXdgDirectory XdgCache "libtorch"
    version = $LIBTORCH_VERSION, else "2.9.1" (the default of that Hasktorch release)
    flavour = $LIBTORCH_CUDA_VERSION, else "cpu"
    tree    = base/version/platformTag/flavour, complete when tree/.ok exists
    LIBTORCH_SKIP_DOWNLOAD set (any value, even empty): the cache is not used at all
    NIX_BUILD_TOP under /build or /private/tmp/nix-build: a Nix sandbox, the cache is not used

Used by probe/libtorch.py (candidates, the tree a build would use) and fetch/plan.py (where
fetch-libtorch installs), so both agree on every path.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

from doctor.host import Host
from doctor.record import record

MARKER = ".ok"
PLATFORMS = ("linux-x86_64", "linux-aarch64", "macos-arm64", "macos-x86_64")
# Setup.hs's getLibtorchVersion default at the commit above; older Hasktorch releases default
# to older versions, so the doctor only insists on a version the user names.
SETUP_HS_DEFAULT_VERSION = "2.9.1"


def libtorch_home(host: Host) -> Path:
    """$LIBTORCH_HOME, else the XDG cache dir + /libtorch.

    Haskell's `getXdgDirectory XdgCache "libtorch"` is `$XDG_CACHE_HOME/libtorch` or
    `~/.cache/libtorch` on Linux AND macOS (platformdirs would say ~/Library/Caches on macOS,
    where Hasktorch would not look). Windows (no Hasktorch support) gets platformdirs' dir.
    """
    if host.env.get("LIBTORCH_HOME"):
        return Path(host.env["LIBTORCH_HOME"])
    if host.system == "Windows":
        import platformdirs

        return Path(platformdirs.user_cache_dir("libtorch", appauthor=False))
    xdg = host.env.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else host.home / ".cache"
    return base / "libtorch"


def platform_tag(system: str, machine: str) -> str | None:
    """Setup.hs's platformTag (it adds linux-aarch64 nowhere; the doctor's fetch uses it too)."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    if system == "Linux":
        return f"linux-{arch}" if arch in ("x86_64", "aarch64") else None
    if system == "Darwin":
        return {"aarch64": "macos-arm64", "x86_64": "macos-x86_64"}.get(arch)
    return None


def tree_path(home: PurePath, version: str, platform: str, flavour: str) -> PurePath:
    return PurePath(home) / version / platform / flavour


@record
class HasktorchRequest:
    """What a Hasktorch build on this machine would look for, and why."""

    home: str
    version: str  # the version Setup.hs would use
    version_from_env: bool  # LIBTORCH_VERSION was set
    flavour: str
    flavour_from_env: bool
    platform: str | None
    tree: str | None  # home/version/platform/flavour
    cached: bool  # tree/.ok exists
    skip_download: bool  # LIBTORCH_SKIP_DOWNLOAD: Hasktorch uses a global libtorch instead
    nix_sandbox: bool
    # LIBTORCH_HOME as set (None: unset). Setup.hs takes it as written: empty, relative or with a
    # literal ~, it is resolved from libtorch-ffi's package folder, not from here.
    home_given: str | None = None
    home_absolute: str | None = None  # that value from this folder, ~ expanded; None when empty


def hasktorch_request(host: Host) -> HasktorchRequest:
    home = libtorch_home(host)
    given = host.env.get("LIBTORCH_HOME")
    version = host.env.get("LIBTORCH_VERSION")
    flavour = host.env.get("LIBTORCH_CUDA_VERSION")
    platform = platform_tag(host.system, host.machine)
    v = version if version is not None else SETUP_HS_DEFAULT_VERSION
    f = flavour if flavour is not None else "cpu"
    tree = tree_path(home, v, platform, f) if platform and _component(v) and _component(f) else None
    nix = host.env.get("NIX_BUILD_TOP", "")
    return HasktorchRequest(
        home=str(home),
        version=v,
        version_from_env=version is not None,
        flavour=f,
        flavour_from_env=flavour is not None,
        platform=platform,
        tree=str(tree) if tree else None,
        cached=bool(tree) and host.is_dir(tree) and host.exists(PurePath(tree) / MARKER),
        skip_download="LIBTORCH_SKIP_DOWNLOAD" in host.env,
        nix_sandbox=nix.startswith(("/build", "/private/tmp/nix-build")),
        home_given=given,
        home_absolute=_from_here(host, given),
    )


def _from_here(host: Host, given: str | None) -> str | None:
    """LIBTORCH_HOME as the folder it names from here, a leading ~ expanded as a shell would; None
    when that is not one folder (unset, empty, another user's ~name)."""
    if not given:
        return None
    if given.startswith("~"):
        return host.tilde_expanded(given)
    return os.path.join(host.cwd, given)


def _component(value: str) -> bool:
    # A value from the environment becomes a path component: one plain name, nothing else.
    return bool(value) and value not in (".", "..") and "/" not in value and "\\" not in value and "\0" not in value


def cached_trees(host: Host) -> list[tuple[str, str, str, str]]:
    """Every (root, version, platform, flavour) under the cache root, complete or not."""
    home = str(libtorch_home(host))
    out = []
    for version in host.listdir(home):
        for platform in host.listdir(os.path.join(home, version)):
            if platform not in PLATFORMS:
                continue
            for flavour in host.listdir(os.path.join(home, version, platform)):
                root = os.path.join(home, version, platform, flavour)  # tree_path's spelling, without pathlib
                if host.is_dir(root):
                    out.append((root, version, platform, flavour))
    return out
