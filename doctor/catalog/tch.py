"""tch-rs / torch-sys release → the libtorch version its build script demands.

Every row is torch-sys/build.rs's `TORCH_VERSION` constant at the last commit carrying that
torch-sys version in LaurentMazare/tch-rs (read with `git log -p -- torch-sys/build.rs
torch-sys/Cargo.toml` at a1dc7ecec800afb99fff031bf1febe876ecf1572), cross-checked against
CHANGELOG.md ("PyTorch v2.9 support", "Adapt to ... libtorch version v1.13.0") and README.md
("requires ... libtorch in version *v2.11.0*"). `tch` and `torch-sys` share one version number.

The build script only enforces the version from 0.13.0 on (commit 2fdc58b, "Check the libtorch
version in more cases"), and then only when `$LIBTORCH/build-version` exists or
LIBTORCH_USE_PYTORCH is set; LIBTORCH_BYPASS_VERSION_CHECK (any value) turns the check off.
"""

from __future__ import annotations

# torch-sys version → (libtorch version, commit of tch-rs whose build.rs says so)
TCH_LIBTORCH = {
    "0.24.0": ("2.11.0", "6e822c2"),
    "0.23.0": ("2.10.0", "2f7d641"),
    "0.22.0": ("2.9.0", "37f872d"),
    "0.21.0": ("2.8.0", "fdb55e0"),
    "0.20.0": ("2.7.0", "6637202"),
    "0.19.0": ("2.6.0", "bd099f1"),
    "0.18.1": ("2.5.1", "eb8d34f"),
    "0.18.0": ("2.5.0", "b849d1d"),
    # 0.17.0 was released (e26845d, "Bump the versions", 2024-07-15) with 2.4.0; main moved to
    # 2.4.1 later (ecd7129) without a new release, and CHANGELOG says "PyTorch v2.4 support".
    "0.17.0": ("2.4.0", "c2ad78e"),
    "0.16.0": ("2.3.0", "37d90c3"),
    "0.15.0": ("2.2.0", "d068b18"),
    "0.14.0": ("2.1.0", "5480d6f"),
    "0.13.0": ("2.0.0", "d94875b"),
    "0.12.0": ("2.0.0", "e51a3c6"),
    "0.11.0": ("2.0.0", "70f2e4d"),
    "0.10.3": ("1.13.0", "ac0135f"),
    "0.10.2": ("1.13.0", "2f3796d"),
    "0.10.0": ("1.13.0", "9674604"),
    "0.9.0": ("1.13.0", "eae2b4a"),
    "0.8.0": ("1.12.0", "a8bdd29"),
    "0.7.2": ("1.11.0", "077a9a2"),
    "0.7.0": ("1.11.0", "5fa99ab"),
    "0.6.1": ("1.10.0", "bb177d4"),
    "0.6.0": ("1.10.0", "aecfb65"),
    "0.5.0": ("1.9.0", "9d1bc4f"),
    "0.4.1": ("1.8.1", "eed3d43"),
    "0.4.0": ("1.8.1", "ec2e412"),
    "0.3.1": ("1.7.0", "fe7bda5"),
    "0.3.0": ("1.7.0", "f1fb65e"),
}
SOURCE_COMMIT = "a1dc7ecec800afb99fff031bf1febe876ecf1572"
# The first torch-sys whose build.rs fails the build on a version mismatch.
VERSION_CHECK_SINCE = "0.13.0"
# TORCH_CUDA_VERSION values the download feature accepts at tch-rs HEAD (build.rs's match arms).
DOWNLOAD_DEVICES = ("cpu", "cu118", "cu121", "cu124", "cu126", "cu128")


def libtorch_for(torch_sys_version: str) -> str | None:
    """The libtorch X.Y.Z this torch-sys release demands, or None when the table has no row."""
    row = TCH_LIBTORCH.get(torch_sys_version.strip())
    return row[0] if row else None


def checks_version(torch_sys_version: str) -> bool:
    """Whether this release's build script refuses a mismatching libtorch (0.13.0 and later)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(torch_sys_version) >= Version(VERSION_CHECK_SINCE)
    except InvalidVersion:
        return True
