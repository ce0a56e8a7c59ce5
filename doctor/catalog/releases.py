"""The libtorch release table: versions × variants × platforms → file names and URLs.

Source: shared/reference/libtorch-releases.md (PyTorch's release tooling, nixpkgs, tch-rs,
Hasktorch). The data is the two tables below; the naming rules are small functions with the
traps spelled out. A version or variant this table does not know yet can still be fetched:
`resolve(..., listed=False)` (the CLI's `--unlisted`) applies the newest naming rules, and
`--url` bypasses the table entirely.

Traps (each has a test):
- `libtorch-shared-with-deps-…` meant the OLD (pre-cxx11) ABI up to 2.6 and means the CXX11
  ABI from 2.8; 2.7 published only CXX11 but still under the `cxx11-abi` name.
- Pre-cxx11 builds exist only up to 2.6.
- macOS: ≤ 2.1 `libtorch-macos-{V}.zip` (x86_64 only); 2.2 both arches with the arch in the
  name; ≥ 2.3 arm64 only. No `%2B{variant}` suffix, always under `cpu/`.
- Windows: release and debug zips; never cu129; no ROCm.
- Linux aarch64: no zip at all — only a wheel (`--from-wheel`).
"""

from __future__ import annotations

import functools
import re
from urllib.parse import quote

from doctor.errors import UsageError
from doctor.formats import version_tuple
from doctor.record import record

BASE_URL = "https://download.pytorch.org/libtorch"
PLATFORMS = ("linux-x86_64", "linux-aarch64", "macos-arm64", "macos-x86_64", "windows-x86_64")
CHANNELS = ("release", "test", "nightly")  # test = release candidates
ABIS = ("cxx11", "pre-cxx11")
# The -D_GLIBCXX_USE_CXX11_ABI value of each ABI.
ABI_DEFINE = {"cxx11": "1", "pre-cxx11": "0"}


@record(frozen=True)
class Series:
    """One torch release series: its patch releases and the CUDA/ROCm variants published."""
    series: str  # "2.6"
    versions: tuple[str, ...]  # the published patch releases
    cuda: tuple[str, ...]
    rocm: tuple[str, ...]


# One row per minor release. Every release also has `cpu`.
SERIES: tuple[Series, ...] = (
    Series("1.13", ("1.13.0", "1.13.1"), ("cu116", "cu117"), ("rocm5.1.1", "rocm5.2")),
    Series("2.0", ("2.0.0", "2.0.1"), ("cu117", "cu118"), ("rocm5.3", "rocm5.4.2")),
    Series("2.1", ("2.1.0", "2.1.1", "2.1.2"), ("cu118", "cu121"), ("rocm5.5", "rocm5.6")),
    Series("2.2", ("2.2.0", "2.2.1", "2.2.2"), ("cu118", "cu121"), ("rocm5.6", "rocm5.7")),
    Series("2.3", ("2.3.0", "2.3.1"), ("cu118", "cu121"), ("rocm5.7", "rocm6.0")),
    Series("2.4", ("2.4.0", "2.4.1"), ("cu118", "cu121", "cu124"), ("rocm6.0", "rocm6.1")),
    Series("2.5", ("2.5.0", "2.5.1"), ("cu118", "cu121", "cu124"), ("rocm6.1", "rocm6.2")),
    Series("2.6", ("2.6.0",), ("cu118", "cu124", "cu126"), ("rocm6.1", "rocm6.2.4")),
    Series("2.7", ("2.7.0", "2.7.1"), ("cu118", "cu126", "cu128"), ("rocm6.2.4", "rocm6.3")),
    Series("2.8", ("2.8.0",), ("cu126", "cu128", "cu129"), ("rocm6.3", "rocm6.4")),
    Series("2.9", ("2.9.0", "2.9.1"), ("cu126", "cu128", "cu130"), ("rocm6.3", "rocm6.4")),
    Series("2.10", ("2.10.0",), ("cu126", "cu128", "cu130"), ("rocm7.0", "rocm7.1")),
    Series("2.11", ("2.11.0",), ("cu126", "cu128", "cu130"), ("rocm7.1", "rocm7.2")),
    Series("2.12", ("2.12.0",), ("cu126", "cu130", "cu132"), ("rocm7.1", "rocm7.2")),
    Series("2.13", ("2.13.0",), ("cu126", "cu130", "cu132"), ("rocm7.1", "rocm7.2")),
)

WINDOWS_NEVER = frozenset({"cu129"})  # published for Linux only

# The last series published with pre-cxx11 (old std::string ABI) Linux builds.
PRE_CXX11_LAST = "2.6"
# The glibc a Linux build needs, from the series on: manylinux2014 (glibc 2.17), then
# manylinux_2_28 from 2.7 (libtorch-releases.md).
GLIBC_FLOORS: tuple[tuple[str, str], ...] = (("1.13", "2.17"), ("2.7", "2.28"))
# torchvision's release made for each torch series (its C++ ops load only with that torch).
TORCHVISION: dict[str, str] = {
    "1.13": "0.14", "2.0": "0.15", "2.1": "0.16", "2.2": "0.17", "2.3": "0.18", "2.4": "0.19", "2.5": "0.20",
    "2.6": "0.21", "2.7": "0.22", "2.8": "0.23", "2.9": "0.24", "2.10": "0.25", "2.11": "0.26", "2.12": "0.27",
    "2.13": "0.28",
}
# Libraries named like libtorch's that no libtorch ships: PyTorch's domain libraries, each its own
# project whose C++ library is built (CMake, from its source) and installed on its own.
SEPARATE_LIBRARIES: tuple[str, ...] = ("torchvision", "torchaudio")


def separate_project(name: str) -> str | None:
    """The project whose library `name` is (libtorchvision.so, torchvision.dll → "torchvision"), or
    None for a library of libtorch itself."""
    stem = name.removeprefix("lib").split(".")[0]
    return next((p for p in SEPARATE_LIBRARIES if stem == p or stem.startswith(p + "_")), None)


# The first release without the TH/THC headers (THC/THC.h and friends).
THC_REMOVED = "1.11"

VARIANT_RE = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+\.\d+(\.\d+)?)$")
# Variants torch publishes as wheels only (no libtorch zip): a wheel's libtorch may carry them.
WHEEL_ONLY_VARIANTS = ("xpu",)
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


class CatalogError(UsageError):
    """What was asked for is not in the table (exit 2); the message lists what is."""

    default_id = "usage.not-in-catalog"


@record(frozen=True)
class Artifact:
    """One published libtorch archive: what it is and where it is downloaded from."""
    version: str | None  # None for a nightly (known only once unpacked)
    variant: str
    platform: str
    abi: str | None  # "cxx11" | "pre-cxx11" on Linux; None on macOS and Windows
    debug: bool
    channel: str
    file_name: str  # as saved on disk: with a literal "+"
    url: str  # with "+" written %2B
    listed: bool  # False when built from the naming rules for a version the table lacks


# -- the table --


def key(version: str) -> tuple[int, ...]:
    return version_tuple(version)


def versions() -> list[str]:
    return list(_sorted_versions())


def newest_version() -> str:
    return _sorted_versions()[-1]


@functools.cache
def _sorted_versions() -> tuple[str, ...]:
    # the table is a constant; `check` asks once per libtorch tree and GPU build (issue 19)
    return tuple(sorted((v for s in SERIES for v in s.versions), key=key))


def is_variant(value: str) -> bool:
    """Whether `value` is a variant name the catalog knows the form of (cpu, cuXYZ, rocmX.Y, xpu)."""
    return bool(VARIANT_RE.match(value)) or value in WHEEL_ONLY_VARIANTS


def series_name(version: str) -> str:
    """"2.6.0+cpu" → "2.6"."""
    return ".".join(str(p) for p in key(version)[:2])


def has_pre_cxx11(version: str) -> bool:
    """Whether a pre-cxx11 Linux build of `version` was published."""
    return key(version)[:2] <= key(PRE_CXX11_LAST)


def glibc_needed(version: str) -> str | None:
    """The glibc the Linux builds of `version` need; None for a version older than the table."""
    floor = None
    for since, glibc in GLIBC_FLOORS:
        if key(version)[:2] >= key(since):
            floor = glibc
    return floor


def newest_series_for_glibc(glibc: str) -> str | None:
    """The newest series whose Linux builds run on `glibc`; None when none does."""
    fits = [s.series for s in SERIES if (need := glibc_needed(s.series)) is not None and key(need) <= key(glibc)]
    return fits[-1] if fits else None


def last_series_with(variant: str) -> str | None:
    """The newest series that published `variant` (cu118 → "2.7"); None when none did."""
    found = [s.series for s in SERIES if variant in s.cuda or variant in s.rocm or variant == "cpu"]
    return found[-1] if found else None


def newest_with(variant: str | None = None, series: str | None = None) -> str | None:
    """The newest published version that has `variant` (every release has cpu), within `series`
    when given ("2.6" → "2.6.0"); None when none does."""
    for s in reversed(SERIES):
        if (series is None or s.series == series) and (variant in (None, "cpu") or variant in s.cuda or variant in s.rocm):
            return max(s.versions, key=key)
    return None


def cuda_variants(version: str) -> list[str]:
    """The CUDA variants published for `version`'s series, oldest CUDA first; [] for an unknown series."""
    s = series_of(version)
    return list(s.cuda) if s else []


def torchvision_for(version: str) -> str | None:
    """The torchvision release series made for torch `version` ("2.6.0" → "0.21"); None when unknown."""
    return TORCHVISION.get(series_name(version))


def series_of(version: str) -> Series | None:
    mm = ".".join(version.split(".")[:2])
    return next((s for s in SERIES if s.series == mm), None)


def is_listed(version: str) -> bool:
    s = series_of(version)
    return s is not None and version in s.versions


def variants(version: str, platform: str) -> list[str]:
    """Variants published for `version` on `platform` as zips ([] where there is no zip)."""
    s = series_of(version)
    if s is None or not has_zip(version, platform):
        return []
    if platform.startswith("macos"):
        return ["cpu"]
    if platform == "windows-x86_64":
        return ["cpu", *(c for c in s.cuda if c not in WINDOWS_NEVER)]
    return ["cpu", *s.cuda, *s.rocm]


def abis(version: str, platform: str) -> list[str | None]:
    """ABIs published for `version` on `platform`; [None] where the question does not arise."""
    if not platform.startswith("linux"):
        return [None]
    return ["cxx11", "pre-cxx11"] if has_pre_cxx11(version) else ["cxx11"]


def has_zip(version: str, platform: str) -> bool:
    v = key(version)[:2]
    if platform == "linux-aarch64":
        return False
    if platform == "macos-arm64":
        return v >= (2, 2)
    if platform == "macos-x86_64":
        return v <= (2, 2)
    return True


def file_name(version: str, variant: str, platform: str, abi: str | None, debug: bool = False) -> str:
    """The official zip name (with a literal '+'). Assumes the combination exists."""
    v = key(version)[:2]
    if platform.startswith("macos"):
        if v <= (2, 1):
            return f"libtorch-macos-{version}.zip"
        arch = platform.split("-", 1)[1]
        return f"libtorch-macos-{arch}-{version}.zip"
    if platform == "windows-x86_64":
        return f"libtorch-win-shared-with-deps-{'debug-' if debug else ''}{version}+{variant}.zip"
    # Linux: the same name meant the old ABI up to 2.6 and means CXX11 from 2.8.
    if v <= (2, 6):
        prefix = "libtorch-cxx11-abi-shared-with-deps" if abi == "cxx11" else "libtorch-shared-with-deps"
    elif v == (2, 7):
        prefix = "libtorch-cxx11-abi-shared-with-deps"
    else:
        prefix = "libtorch-shared-with-deps"
    return f"{prefix}-{version}+{variant}.zip"


def nightly_file_name(variant: str, platform: str, debug: bool = False) -> str:
    if platform == "macos-arm64":
        return "libtorch-macos-arm64-latest.zip"
    if platform == "windows-x86_64":
        return f"libtorch-win-shared-with-deps-{'debug-' if debug else ''}latest.zip"
    return "libtorch-shared-with-deps-latest.zip"


def url_for(name: str, variant: str, channel: str = "release", base: str = BASE_URL) -> str:
    folder = {"release": "", "test": "test/", "nightly": "nightly/"}[channel]
    # macOS zips carry no variant and live under cpu/
    return f"{base.rstrip('/')}/{folder}{variant}/{quote(name, safe='')}"


# -- resolving a request --


def check_platform(platform: str) -> None:
    if platform not in PLATFORMS:
        raise CatalogError(f"unknown platform {platform!r}; known: {', '.join(PLATFORMS)}")


def check_variant_form(variant: str) -> None:
    if not VARIANT_RE.match(variant):
        raise CatalogError(f"{variant!r} is not a libtorch variant; expected cpu, cuXYZ (e.g. cu128) or rocmX.Y")


def resolve(
    version: str | None,
    variant: str,
    platform: str,
    abi: str | None = None,
    debug: bool = False,
    channel: str = "release",
    base: str = BASE_URL,
    listed: bool = True,
) -> Artifact:
    """The zip for a request, or a CatalogError saying what exists instead.

    `abi=None` means the default: cxx11 on Linux. `listed=False` skips the table (a newer
    release than this table knows) and applies the current naming rules.
    """
    check_platform(platform)
    check_variant_form(variant)
    if channel not in CHANNELS:
        raise CatalogError(f"unknown channel {channel!r}; known: {', '.join(CHANNELS)}")
    if debug and platform != "windows-x86_64":
        raise CatalogError("--debug builds exist only for Windows (windows-x86_64)")
    if abi is not None and abi not in ABIS:
        raise CatalogError(f"unknown ABI {abi!r}; known: {', '.join(ABIS)}")
    if not platform.startswith("linux"):
        if abi is not None:
            raise CatalogError(f"--abi applies to Linux only; {platform} has no CXX11 ABI choice")
    elif abi is None:
        abi = "cxx11"
    if platform == "linux-aarch64":
        raise CatalogError("there is no libtorch zip for linux-aarch64; the only source is a PyTorch wheel",
                           "use --from-wheel")
    if platform.startswith("macos") and variant != "cpu":
        raise CatalogError(f"macOS libtorch is CPU-only (MPS is built in); there is no {variant} build for {platform}",
                           "use --variant cpu")
    if platform == "windows-x86_64" and variant.startswith("rocm"):
        raise CatalogError("there are no ROCm builds of libtorch for Windows")

    if channel == "nightly":
        if abi == "pre-cxx11":
            raise CatalogError("nightly libtorch is CXX11 ABI only")
        name = nightly_file_name(variant, platform, debug)
        return Artifact(None, variant, platform, abi, debug, channel, name,
                        url_for(name, "cpu" if platform.startswith("macos") else variant, channel, base), False)

    if version is None:
        raise CatalogError("a version is needed", "give --version")
    if not VERSION_RE.match(version):
        raise CatalogError(f"{version!r} is not a release version; expected MAJOR.MINOR.PATCH like {newest_version()}")
    known = is_listed(version)
    if listed and channel == "release" and not known:
        raise CatalogError(
            f"libtorch {version} is not in this doctor's release table; known: {_ranges()}",
            "give --unlisted to build the URL from the current naming rules, or --url",
        )
    if not has_zip(version, platform):
        where = {"macos-arm64": "from 2.2", "macos-x86_64": "up to 2.2"}.get(platform, "")
        raise CatalogError(f"there is no libtorch {version} zip for {platform}" + (f" (published {where})" if where else ""))
    if known and listed:
        published = variants(version, platform)
        if variant not in published:
            raise CatalogError(f"libtorch {version} has no {variant} build for {platform}; published: {', '.join(published)}")
    if abi is not None and abi not in abis(version, platform):
        raise CatalogError(
            f"libtorch {version} was published with the CXX11 ABI only (pre-cxx11 builds stopped after 2.6)",
            "use --abi cxx11, or --version 2.6.0 or older for a pre-cxx11 build",
        )
    name = file_name(version, variant, platform, abi, debug)
    folder = "cpu" if platform.startswith("macos") else variant
    return Artifact(version, variant, platform, abi, debug, channel, name, url_for(name, folder, channel, base),
                    known)


def _ranges() -> str:
    return ", ".join(f"{s.series}.x ({', '.join(v.rsplit('.', 1)[1] for v in s.versions)})" for s in SERIES)


# -- reading a file name back (for --url and --archive) --

_LINUX_RE = re.compile(r"^libtorch-(?P<cxx>cxx11-abi-)?shared-with-deps-(?P<v>\d+\.\d+\.\d+)(?:\+|%2B)(?P<var>[a-z0-9.]+)\.zip$")
_WIN_RE = re.compile(r"^libtorch-win-shared-with-deps-(?P<debug>debug-)?(?P<v>\d+\.\d+\.\d+)(?:\+|%2B)(?P<var>[a-z0-9.]+)\.zip$")
_MAC_RE = re.compile(r"^libtorch-macos-(?:(?P<arch>arm64|x86_64)-)?(?P<v>\d+\.\d+\.\d+)\.zip$")


@record(frozen=True)
class NameFacts:
    """What an official archive's file name says about its contents."""
    version: str
    variant: str
    platform: str
    abi: str | None
    debug: bool


def parse_file_name(name: str) -> NameFacts | None:
    """What an official zip name says; the ABI from name AND version (the 2.6/2.8 trap)."""
    name = name.rsplit("/", 1)[-1]
    if m := _LINUX_RE.match(name):
        v = m["v"]
        if m["cxx"]:
            abi = "cxx11"
        else:
            abi = "pre-cxx11" if has_pre_cxx11(v) else "cxx11"
        return NameFacts(v, m["var"], "linux-x86_64", abi, False)
    if m := _WIN_RE.match(name):
        return NameFacts(m["v"], m["var"], "windows-x86_64", None, bool(m["debug"]))
    if m := _MAC_RE.match(name):
        return NameFacts(m["v"], "cpu", f"macos-{m['arch'] or 'x86_64'}", None, False)
    return None


def host_platform(system: str, machine: str) -> str | None:
    """Hasktorch's platform tag for this machine (None when libtorch has no build for it)."""
    m = machine.lower()
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "arm64"}.get(m)
    if system == "Linux" and arch:
        return "linux-aarch64" if arch in ("aarch64", "arm64") else "linux-x86_64"
    if system == "Darwin" and arch:
        return "macos-arm64" if arch in ("aarch64", "arm64") else "macos-x86_64"
    if system == "Windows" and arch == "x86_64":
        return "windows-x86_64"
    return None
