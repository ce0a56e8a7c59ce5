"""A PyTorch wheel as a libtorch tree: the only source on Linux aarch64, and how PyTorch's own CI
now builds its libtorch zips. The wheel's `torch/lib`, `torch/include` and `torch/share` are a
complete libtorch; we add the `build-version` (and `build-hash`) files the zips carry.

pip does the download (`pip download torch==V --no-deps`), so the user's pip configuration
(index URL, proxies, certificates, find-links) applies as it does for their other installs.
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

from doctor.errors import DoctorError
from doctor.host import Host
from doctor.probe.python_torch import variant_from
from doctor.probe.versions import parse_torch_config_cmake, parse_version_py, split_local
from doctor.record import record

TREE_DIRS = ("lib", "include", "share")
PIP_TIMEOUT = 3600.0  # CUDA wheels are gigabytes

# What `pip download --platform` needs to fetch for another machine. A macOS tag means "runs
# on this macOS or newer" and pip accepts every older one below it, so the newest macOS is named:
# torch 2.13.0 is tagged macosx_14_0_arm64, which macosx_11_0_arm64 would refuse. The tree's
# real minimum (LC_BUILD_VERSION) is then reported by `doctor check --libtorch`.
PLATFORM_TAGS = {
    "linux-x86_64": "manylinux_2_28_x86_64",
    "linux-aarch64": "manylinux_2_28_aarch64",
    "macos-arm64": "macosx_26_0_arm64",
    "macos-x86_64": "macosx_26_0_x86_64",
    "windows-x86_64": "win_amd64",
}


@record
class WheelFacts:
    version: str  # "2.13.0+cpu" as in torch/version.py
    base_version: str
    variant: str
    git_version: str | None
    abi: str | None  # from TorchConfig.cmake when it says; otherwise the caller's rule


# The CPythons torch wheels are built for, from 3.8 on, and the next: tried when pip finds no
# torch==V wheel for the Python that runs it. The C++ library in a wheel (lib/, include/, share/)
# is the same for every Python, so any CPython's wheel makes the tree.
CPYTHONS = tuple((3, minor) for minor in range(8, 16))
NO_WHEEL = "No matching distribution found"  # pip's words when no file fits the asked tags


def requirement(version: str, variant: str, platform: str) -> str:
    """What pip is asked for. On Linux x86_64 a CPU or ROCm build is asked for by its local label
    (`torch==2.13.0+cpu`): PyTorch's indexes label those wheels, and PyPI's unlabelled torch there
    is a CUDA build, which pip would otherwise download (gigabytes) for the fetch to refuse. A
    CUDA variant stays unlabelled: PyPI's torch is one."""
    if platform == "linux-x86_64" and (variant == "cpu" or variant.startswith("rocm")):
        return f"torch=={version}+{variant}"
    return f"torch=={version}"


def pip_download(host: Host, version: str, variant: str, platform: str, host_platform: str | None, workdir: Path,
                 index_url: str | None, log) -> tuple[Path, str | None]:
    """Run pip and return (wheel file, where pip got it from if it said). When no wheel fits the
    Python that runs pip (a Python newer or older than the release supports), ask again for the
    other CPythons, nearest first: the tree needs only the wheel's C++ part."""
    from doctor.fetch.names import redact_text

    wanted = requirement(version, variant, platform)
    argv = [host.python, "-m", "pip", "download", wanted, "--no-deps", "--only-binary=:all:",
            "--progress-bar", "off", "-d", str(workdir)]
    if index_url:
        argv += ["--index-url", index_url]
    if platform != host_platform:
        argv += ["--platform", PLATFORM_TAGS[platform]]
    log(redact_text("running: python " + " ".join(argv[1:]), index_url))
    result = host.run(argv, timeout=PIP_TIMEOUT)
    wheels = sorted(workdir.glob("torch-*.whl"))
    what = wanted
    if not wheels and NO_WHEEL in result.stderr + result.stdout:
        own = f"{sys.version_info[0]}.{sys.version_info[1]}"
        first = result
        for python in other_pythons(sys.version_info[:2]):
            log(f"no {wanted} wheel for Python {own} there; asking for Python {python}'s "
                "(the C++ library in it is the same for every Python)")
            result = host.run([*argv, "--python-version", python], timeout=PIP_TIMEOUT)
            wheels = sorted(workdir.glob("torch-*.whl"))
            if wheels or NO_WHEEL not in result.stderr + result.stdout:
                break
        else:  # no CPython has one: pip's words about the Python asked first say most
            result, what = first, f"{wanted} for Python {own} or any CPython {_span(CPYTHONS)}"
    if not result.ok or not wheels:
        tail = (result.stderr or result.stdout or result.error).strip().splitlines()[-3:]
        labelled = "+" in wanted
        raise DoctorError(redact_text(f"pip could not download {what}: " + (" / ".join(tail) or "no wheel"), index_url),
                          (f"PyPI's torch for Linux x86_64 is a CUDA build; the {variant} build is on PyTorch's index: "
                           f"give --index-url https://download.pytorch.org/whl/{variant}") if labelled and not index_url else
                          "check `pip download torch==VERSION --no-deps` by hand; give --index-url "
                          "https://download.pytorch.org/whl/<variant> for a specific variant",
                          error_id="fetch.download-failed")
    return wheels[-1], _origin(result.stdout + "\n" + result.stderr)


def other_pythons(own: tuple[int, int]) -> list[str]:
    """The CPythons other than `own`, nearest first, the older one first at equal distance (a
    Python newer than the release is the usual case: it has no wheel yet)."""
    others = [v for v in CPYTHONS if v != tuple(own)]
    others.sort(key=lambda v: (abs(v[1] - own[1]) if v[0] == own[0] else 99, v > tuple(own)))
    return [f"{major}.{minor}" for major, minor in others]


def _span(versions: tuple[tuple[int, int], ...]) -> str:
    return f"{versions[0][0]}.{versions[0][1]}–{versions[-1][0]}.{versions[-1][1]}"


def _origin(text: str) -> str | None:
    for pattern in (r"Downloading (\S+\.whl)", r"Processing (\S+\.whl)", r"File was already downloaded (\S+\.whl)"):
        if m := re.search(pattern, text):
            return m.group(1)
    return None


_NOT_TORCH = ("check that the index pip uses (--index-url, pip.conf) serves PyTorch's own torch wheels "
              "(https://download.pytorch.org/whl/<variant>)")


def read_wheel_facts(zf: zipfile.ZipFile) -> WheelFacts:
    try:
        text = zf.read("torch/version.py").decode("utf-8", "replace")
    except KeyError as exc:
        raise DoctorError("that wheel has no torch/version.py: not a PyTorch wheel", _NOT_TORCH,
                          error_id="fetch.bad-archive") from exc
    values = {k: v for k, v in parse_version_py(text).items() if isinstance(v, str)}
    version = values.get("__version__")
    if not version:
        raise DoctorError("torch/version.py in the wheel names no __version__", _NOT_TORCH, error_id="fetch.bad-archive")
    base, local = split_local(version)
    # Wheels from PyPI carry no "+cuXYZ"; version.py still says which CUDA they were built for.
    variant = local or variant_from(values.get("cuda"), values.get("hip"))
    abi = None
    try:
        config = zf.read("torch/share/cmake/Torch/TorchConfig.cmake").decode("utf-8", "replace")
        abi = abi_from_config(config)
    except KeyError:
        pass
    return WheelFacts(version, base, variant, values.get("git_version"), abi)


def abi_from_config(text: str) -> str | None:
    """TorchConfig.cmake up to 2.7 says `-D_GLIBCXX_USE_CXX11_ABI=0|1`; from 2.8 nothing (CXX11)."""
    flag = parse_torch_config_cmake(text)["abi_flag"]
    return {"1": "cxx11", "0": "pre-cxx11"}.get(flag)


def tree_name(name: str) -> str | None:
    """Where a wheel entry goes in the libtorch tree (None: not part of libtorch)."""
    for d in TREE_DIRS:
        prefix = f"torch/{d}/"
        if name.startswith(prefix):
            return d + "/" + name[len(prefix):]
    return None


def extra_files(facts: WheelFacts) -> list[tuple[str, bytes, int]]:
    files = [("build-version", f"{facts.version}\n".encode(), 0o644)]
    if facts.git_version:
        files.append(("build-hash", f"{facts.git_version}\n".encode(), 0o644))
    return files
