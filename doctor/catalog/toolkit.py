"""The CUDA toolkit as data: the newest host compiler each release's nvcc accepts, the GPU
architectures each release builds (`NVCC_ARCHES`), the CUDA libraries and their packages.

nvcc enforces the compiler limits in `include/crt/host_config.h` ("#error -- unsupported GNU version!
gcc versions later than N are not supported!"); NVIDIA's Linux installation guide for each
release lists the same majors in its "Supported Linux distributions" table. Sources per row
are in docs/cuda.md; tests/catalog/test_toolkit.py checks every row.
"""

from __future__ import annotations

import re

from doctor.record import record


@record(frozen=True)
class HostCompilerLimit:
    """The newest host GCC and Clang one CUDA release accepts."""
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


@record(frozen=True)
class CudaLibrary:
    """A CUDA library torch loads: its soname, pip package and directory."""
    key: str  # "cudnn"
    stem: str  # soname stem: "libcudnn.so"
    package: str  # pip distribution without the -cuXY suffix: "nvidia-cudnn"
    pip_dir: str  # directory under site-packages/nvidia: "cudnn"
    symbols: tuple[str, ...] = ()  # prefixes of the functions it exports, to attribute undefined symbols


# The CUDA libraries a PyTorch CUDA build loads, with the pip wheels that ship them
# (torch's own METADATA pins these: Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; ...).
CUDA_LIBRARIES: tuple[CudaLibrary, ...] = (
    CudaLibrary("cudart", "libcudart.so", "nvidia-cuda-runtime", "cuda_runtime", ("cudaGetDevice", "cudaMalloc", "cudaStream", "cudaLaunch", "cudaGraph")),
    CudaLibrary("nvrtc", "libnvrtc.so", "nvidia-cuda-nvrtc", "cuda_nvrtc", ("nvrtc",)),
    CudaLibrary("cupti", "libcupti.so", "nvidia-cuda-cupti", "cuda_cupti"),
    CudaLibrary("cublas", "libcublas.so", "nvidia-cublas", "cublas", ("cublas",)),
    CudaLibrary("cublasLt", "libcublasLt.so", "nvidia-cublas", "cublas", ("cublasLt",)),
    CudaLibrary("cudnn", "libcudnn.so", "nvidia-cudnn", "cudnn", ("cudnn",)),
    CudaLibrary("cufft", "libcufft.so", "nvidia-cufft", "cufft", ("cufft",)),
    CudaLibrary("curand", "libcurand.so", "nvidia-curand", "curand", ("curand",)),
    CudaLibrary("cusolver", "libcusolver.so", "nvidia-cusolver", "cusolver", ("cusolver",)),
    CudaLibrary("cusparse", "libcusparse.so", "nvidia-cusparse", "cusparse", ("cusparse",)),
    CudaLibrary("cusparseLt", "libcusparseLt.so", "nvidia-cusparselt", "cusparselt", ("cusparseLt",)),
    CudaLibrary("nccl", "libnccl.so", "nvidia-nccl", "nccl", ("nccl",)),
    CudaLibrary("nvJitLink", "libnvJitLink.so", "nvidia-nvjitlink", "nvjitlink", ("__nvJitLink", "nvJitLink")),
    CudaLibrary("nvtx", "libnvToolsExt.so", "nvidia-nvtx", "nvtx"),
    CudaLibrary("cufile", "libcufile.so", "nvidia-cufile", "cufile"),
)


# NCCL entry points torch needs, and the NCCL release that introduced them (NCCL release notes).
NCCL_SYMBOL_SINCE: dict[str, str] = {"ncclCommRegister": "2.19", "ncclCommDeregister": "2.19", "ncclCommSplit": "2.18",
                                     "ncclCommWindowRegister": "2.27"}


def cuda_library_prefixes() -> tuple[str, ...]:
    """File-name prefixes of the CUDA libraries above on Linux ("libcudart") and Windows ("cudart64")."""
    return (tuple(lib.stem.removesuffix(".so") for lib in CUDA_LIBRARIES)
            + tuple(f"{lib.key}64" for lib in CUDA_LIBRARIES))


def pip_package(key: str, cuda_major: int | str | None) -> str | None:
    """The pip wheel shipping a CUDA library for a CUDA major: ("nccl", 12) → "nvidia-nccl-cu12"."""
    lib = next((lib for lib in CUDA_LIBRARIES if lib.key == key), None)
    if lib is None:
        return None
    return f"{lib.package}-cu{cuda_major}" if cuda_major else f"{lib.package}-cu<CUDA major>"


def cuda_library_for_symbol(name: str) -> CudaLibrary | None:
    """Which library an undefined symbol comes from, by its exported-function prefix."""
    hits = [lib for lib in CUDA_LIBRARIES for p in lib.symbols if name.startswith(p)]
    return max(hits, key=lambda lib: max(len(p) for p in lib.symbols if name.startswith(p)), default=None)


def cuda_library_for_soname(soname: str) -> CudaLibrary | None:
    """The library a NEEDED entry names: "libcudnn.so.9" → cudnn (the longest stem wins: cublasLt).
    Wheels and libtorch zips repaired by auditwheel bundle hashed copies: "libcudart-9335f6a2.so.12"."""
    soname = re.sub(r"^(lib[\w.]+?)-[0-9a-f]{8}(\.so.*)$", r"\1\2", soname)
    hits = [lib for lib in CUDA_LIBRARIES if soname == lib.stem or soname.startswith(lib.stem + ".")]
    return max(hits, key=lambda lib: len(lib.stem), default=None)


def split_cuda_package(name: str) -> tuple[str, int | None]:
    """("nvidia-nccl", 12) from "nvidia-nccl-cu12" / "nvidia_nccl_cu12"; (name, None) without a suffix."""
    norm = re.sub(r"[-_.]+", "-", name).lower()
    m = re.fullmatch(r"(.+)-cu(\d+)", norm)
    return (m.group(1), int(m.group(2))) if m else (norm, None)


# TORCH_CUDA_ARCH_LIST names, as torch/utils/cpp_extension.py `_get_cuda_arch_flags` expands them
# (combined names first: the expansion is a string replace, in this order).
NAMED_ARCHES: tuple[tuple[str, str], ...] = (
    ("Kepler+Tesla", "3.7"), ("Kepler", "3.5+PTX"), ("Maxwell+Tegra", "5.3"), ("Maxwell", "5.0;5.2+PTX"),
    ("Pascal", "6.0;6.1+PTX"), ("Volta+Tegra", "7.2"), ("Volta", "7.0+PTX"), ("Turing", "7.5+PTX"),
    ("Ampere+Tegra", "8.7"), ("Ampere", "8.0;8.6+PTX"), ("Ada", "8.9+PTX"), ("Hopper", "9.0+PTX"),
    ("Blackwell+Tegra", "11.0"), ("Blackwell", "10.0;10.3;12.0;12.1+PTX"),
)
# ... and the arches it accepts (each also with "+PTX").
CPP_EXTENSION_ARCHES: tuple[str, ...] = (
    "3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0",
    "9.0a", "10.0", "10.0a", "11.0", "11.0a", "10.3", "10.3a", "12.0", "12.0a", "12.1", "12.1a",
)


# The oldest GCC and Clang majors that build code against a libtorch needing this C++ standard:
# PyTorch documents gcc ≥ 9 for its C++17 releases; the C++20 releases' headers need the C++20
# library (<concepts>, <span>, ranges) that arrived complete in GCC 11 and Clang 14.
COMPILERS_FOR_STANDARD: dict[int, tuple[int, int]] = {17: (9, 10), 20: (11, 14)}


def compilers_for(standard: int) -> tuple[int, int] | None:
    """(gcc major, clang major) at least, for `standard`; None for a standard the table lacks."""
    return COMPILERS_FOR_STANDARD.get(standard)


# The CUDA releases whose nvcc compiles for each compute capability ahead of time (`-arch
# compute_XY`, `--list-gpu-code`): (first, last), last None while current releases still do.
# From NVIDIA's CUDA Toolkit release notes: 9.0 dropped Fermi (2.x), 11.0 sm_30/sm_32, 12.0
# Kepler (3.5, 3.7), 13.0 everything before 7.5 (Maxwell, Pascal, Volta), and 13.0 renamed
# sm_101 to sm_110. From 11.8 on, tests/catalog/test_toolkit.py checks every row against the
# target list of that release's ptxas (tests/fixtures/nvcc/*.ptxas-gpu-name.txt).
NVCC_ARCHES: dict[str, tuple[str, str | None]] = {
    "2.0": ("3.0", "8.0"), "2.1": ("3.2", "8.0"), "3.0": ("4.2", "10.2"), "3.2": ("6.0", "10.2"),
    "3.5": ("5.0", "11.8"), "3.7": ("6.5", "11.8"), "5.0": ("6.0", "12.9"), "5.2": ("6.5", "12.9"),
    "5.3": ("7.0", "12.9"), "6.0": ("8.0", "12.9"), "6.1": ("8.0", "12.9"), "6.2": ("8.0", "12.9"),
    "7.0": ("9.0", "12.9"), "7.2": ("10.0", "12.9"), "7.5": ("10.0", None), "8.0": ("11.0", None),
    "8.6": ("11.1", None), "8.7": ("11.4", None), "8.8": ("13.0", None), "8.9": ("11.8", None),
    "9.0": ("11.8", None), "10.0": ("12.8", None), "10.1": ("12.8", "12.9"), "10.3": ("12.9", None),
    "11.0": ("13.0", None), "12.0": ("12.8", None), "12.1": ("12.9", None),
}
# Arch-specific targets (9.0a) came with CUDA 12.0 for 9.0 and later; family ones (10.0f) with
# 12.9 for 10.0 and later: (oldest base, first release).
_SUFFIXES = {"a": ("9.0", "12.0"), "f": ("10.0", "12.9")}


def nvcc_releases(cc: str) -> tuple[str, str | None] | None:
    """(first, last) CUDA release whose nvcc builds for `cc` ("8.6", "9.0a"); None when unknown."""
    base = cc.rstrip("af")
    span = NVCC_ARCHES.get(base)
    if span is None or len(cc) - len(base) > 1:
        return None
    first, last = span
    if base != cc:
        oldest, since = _SUFFIXES[cc[-1]]
        if major_minor(base) < major_minor(oldest):
            return None
        first = max(first, since, key=major_minor)
    return first, last


def nvcc_targets(release: str) -> list[str]:
    """The compute capabilities (base targets, "8.6") the nvcc of CUDA `release` ("11.0") builds."""
    want = major_minor(release)
    if want is None:
        return []
    return sorted((cc for cc, (first, last) in NVCC_ARCHES.items()
                   if major_minor(first) <= want and (last is None or want <= major_minor(last))), key=major_minor)


def compute_capability(code: str) -> str | None:
    """"8.6" from "compute_86" / "sm_86", "10.0a" from "sm_100a"; None for what is not one."""
    m = re.fullmatch(r"(?:compute|sm)_(\d{2,3})([af]?)", code)
    return f"{m[1][:-1]}.{m[1][-1]}{m[2]}" if m else None
