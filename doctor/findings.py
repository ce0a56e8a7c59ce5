"""Every finding id the doctor can report, with its one-line meaning: the one registry that the
policy (ignore / error-on), the docs index (scripts/findings-index) and the docs test read.

An id never changes meaning once released; a new id gets a row here and a page
docs/findings/<id>.md (tests/test_docs.py keeps the two equal). The family is the part before
the first dot: the area of the machine or of the log the finding is about.
"""

from __future__ import annotations

FINDINGS: dict[str, str] = {
    "abi.mismatch": 'libstdc++ has two `std::string`s, selected by `-D_GLIBCXX_USE_CXX11_ABI=0/1`',
    "apple.rosetta": 'an x86_64 Python (an old Homebrew under `/usr/local`, an x86 conda) runs translated on Apple silicon',
    "arch.mismatch": 'the libtorch found was compiled for another CPU: the x86_64 zip on Apple silicon, the x86_64 Linux zip on an aarch64 board (Jetson, Raspberry Pi, …',
    "bench.compile-failed": "torch.compile's CPU backend (inductor) writes C++ and compiles it with the system's C++ compiler (`g++`, `clang++`, or `$CXX`); its GPU backend …",
    "bench.gemm-slow": 'matrix multiplication is the one operation whose speed is predictable from the hardware',
    "bench.threads-limited": "torch uses fewer threads than the CPUs it may run on, and the measured cost of that",
    "binary.symbol-unresolved": 'the program was linked against a library version (or ABI) that defined these symbols, and the libraries the loader now gives it do not: another …',
    "binary.unreadable": '`--binary` reads an ELF program, extension module (`.so`) or shared library',
    "build.failed": 'the probe (a few lines of C++ against the active libtorch, built with exactly the environment `doctor emit setenv` gives plus your …',
    "build.ninja-missing": '`torch.utils.cpp_extension.load()` (and `BuildExtension` by default) builds with ninja and checks `ninja --version` on `PATH` first; the `ninja` …',
    "command.failed": 'the command `doctor explain --from-command` ran failed, and none of the errors its output holds is a setup problem the doctor knows: a bug in the …',
    "cmake.nvtoolsext-missing": "libtorch ≤ 2.4's CMake config (`share/cmake/Caffe2/public/cuda.cmake`) looks for NVTX v2's `libnvToolsExt`, which CUDA 12 toolkits no longer ship …",
    "cmake.torch-found-twice": "`find_package(Torch)` ran a second time in one CMake project (a subdirectory, or a dependency added with `add_subdirectory()`) …",
    "cmake.torch-library-missing": "CMake found libtorch's config files, but not the library beside them (`lib/libtorch.so`, `lib/torch.lib`): a partly extracted or partly copied …",
    "cmake.torch-not-found": '`find_package(Torch)` searches `CMAKE_PREFIX_PATH` and `Torch_DIR`; neither names a libtorch (whose package file is …',
    "cuda.arch-list-invalid": '`TORCH_CUDA_ARCH_LIST` holds an entry torch does not accept (it wants compute capabilities such as `8.6`, `9.0a`, `12.0+PTX`, or names such as …',
    "cuda.arch-list-misses-gpu": 'with `TORCH_CUDA_ARCH_LIST` set, torch extensions are compiled only for the listed architectures; a GPU not covered (no cubin of its major ≤ its …',
    "cuda.arch-unsupported": 'a CUDA build carries kernels for a list of compute capabilities (plus PTX for one)',
    "cuda.driver-too-old": 'each CUDA line needs a minimum driver (12.x: ≥ 525.60.13 on Linux; 13.x: ≥ 580)',
    "cuda.host-compiler-unsupported": 'every nvcc release accepts host compilers only up to a given major, enforced in `include/crt/host_config.h`',
    "cuda.library-mixed-majors": 'packages built for different CUDA majors pull in `nvidia-*-cu12` and `nvidia-*-cu13` wheels; both install under `site-packages/nvidia` and ship …',
    "cuda.library-shadowed": 'the torch CUDA wheels find their pip-installed `nvidia-*` libraries through the RUNPATH of `libtorch_cuda.so` (`$ORIGIN/../../nvidia/<lib>/lib`). …',
    "cuda.library-too-old": "the library the loader picks is older than the one the build was linked against: a pip `nvidia-*` package older than torch's pin (`Requires-Dist: …",
    "cuda.no-device": 'no driver is loaded (not installed, kernel updated without its module, Secure Boot), the GPU was not passed into the container, or …',
    "cuda.not-compiled": 'the libtorch (or torch wheel) in use is a CPU build — the default download for many tools — so there is no CUDA backend',
    "cuda.ptx-jit": "NVIDIA's minor-version compatibility lets a CUDA 12.x build run on any driver at or above the 12.x floor (525.60.13 on Linux, 528.33 on Windows): …",
    "cuda.toolkit-mismatch": "PyTorch's extension builder (`torch/utils/cpp_extension.py`, `_check_cuda_version`) runs `$CUDA_HOME/bin/nvcc --version`, takes `release X.Y`, and …",
    "cuda.toolkit-not-found": 'building CUDA code (a PyTorch extension, a `.cu` file in CMake, flash-attn, apex…) needs the CUDA *toolkit* (nvcc, headers, `libcudart`), which …',
    "cxx.std-too-old": "libtorch's headers need C++17 (from 2.13: C++20)",
    "diff.changed": '"it works on my machine and fails in CI" almost always comes down to one of a few facts: another libtorch version or variant, the other CXX11 ABI, …',
    "disk.low": 'a CUDA libtorch is 2–4 GiB unpacked, plus the download beside it while it installs',
    "dist.address-in-use": 'The rendezvous store listens on MASTER_PORT (29500 unless set); another job, or a leftover process of an earlier run, already holds that port on …',
    "dist.master-addr": 'Every rank dials MASTER_ADDR to reach the rendezvous store',
    "dist.no-libuv": "torch's Windows builds have no libuv, and since torch 2.4 a `TCPStore` uses the libuv server unless it is told otherwise (PyTorch's tutorial …",
    "dist.port-unreachable": "A firewall, security group or another network boundary closes MASTER_PORT between this node and rank 0's host",
    "dist.socket-ifname": '`GLOO_SOCKET_IFNAME` or `NCCL_SOCKET_IFNAME` names an interface this node does not have (nodes name their NICs differently: eth0, ens5, enP7s7), …',
    "dist.store-timeout": 'Some rank never reached the rendezvous store: a node was not started or crashed early, it cannot reach MASTER_ADDR:MASTER_PORT, or rank 0 was so …',
    "dist.version-mismatch": 'The nodes of one job run different NCCL releases: another torch wheel on one node (each torch wheel carries its own NCCL), an `nvidia-nccl-cu*` …',
    "fleet.collective-failed": 'A collective returned other values than it must (exact small integers summed or gathered), or failed: broken transport, mismatched library …',
    "fleet.collective-skipped": 'The NCCL collectives need a CUDA build of torch with NCCL and a GPU on every rank; when one rank lacks either, they cannot run and only gloo is tested',
    "fleet.differs": 'The nodes of one job do not run the same software: another torch, libtorch, ABI, variant, driver or GPUs on one node',
    "fleet.rank-missing": 'A rank of the job never reached the rendezvous store: its node was not started, its launcher failed before it, or it cannot reach …',
    "fleet.train-failed": 'Data-parallel training averages gradients across ranks with all_reduce; if that average is wrong or ranks drift apart, the job trains a different …',
    "glibc.missing": 'every official libtorch and torch wheel is built for glibc; a musl system (Alpine) cannot load them',
    "glibc.too-old": 'libtorch was built against a newer C library or C++ runtime than the one loaded',
    "gloo.connection-refused": 'A rank dialled a peer that does not listen at that address: the peer advertised a loopback address because its host name resolves to 127.0.0.1, a …',
    "gpu.cpu-build": "the CPU flavour is what most scripts download by default (Hasktorch's `get-deps.sh` without `-a`, `pip install torch` from the CPU index)",
    "headers.missing": 'libtorch is not installed, or the compiler was not told where its headers are. libtorch needs **two** include directories',
    "libtorch.conflict": 'for example a `LIBTORCH` for tch-rs, a Hasktorch cache tree and a Python wheel of another version',
    "libtorch.not-found": 'no libtorch is in any place a build looks',
    "libtorch.path-invalid": 'a variable that a build trusts first — `LIBTORCH`, `LIBTORCH_LIB`, `Torch_DIR` — names a directory that is missing, or one without `include/torch` …',
    "libtorch.version-disagree": 'a release unpacked over another one, or headers copied from one release beside libraries of another',
    "link.as-needed": 'the program uses no symbol of `libtorch_cuda` directly, so a linker running with `--as-needed` (the default on Ubuntu and in many toolchains, …',
    "link.library-missing": "the linker was not given libtorch's library directory (`<root>/lib`)",
    "loader.empty-entry": 'the dynamic loader reads an empty entry of `LD_LIBRARY_PATH` as the current folder',
    "loader.library-not-found": 'the program was built, but at run time the dynamic loader searches only RPATH/RUNPATH, `LD_LIBRARY_PATH` (`DYLD_LIBRARY_PATH` on macOS, `PATH` on …',
    "loader.map-failed": "the loader found a library but the kernel would not map it: a noexec mount, or an address-space limit (`ulimit -v`)",
    "loader.other-libtorch": "a program linked with `-ltorch` and no rpath takes each libtorch library from the first place the loader finds it",
    "loader.preload": 'every library in `LD_PRELOAD` is loaded into every program before anything else',
    "loader.relative-entry": 'the dynamic loader takes a relative entry of `LD_LIBRARY_PATH` from the folder a program is started in',
    "macos.duplicate-rpath": 'two build layers each add the same `-rpath` — e.g',
    "macos.min-version": "a library needs a newer macOS than the program targets or the machine runs",
    "memory.oom": "the work does not fit: batch or input too large, other processes on the GPU, or fragmentation of PyTorch's caching allocator",
    "nccl.memlock-low": 'InfiniBand and RoCE transports register (pin) memory; a small locked-memory limit makes NCCL fall back to sockets or fail to register buffers',
    "nccl.not-compiled": "NCCL comes only with torch's CUDA builds for Linux: the Windows and macOS builds and every CPU build have none …",
    "nccl.shm-small": "NCCL's shared-memory transport (and PyTorch DataLoader workers) need far more than Docker's 64 MB default; with less, NCCL fails with 'unhandled …",
    "nccl.system-error": 'NCCL passes data between ranks of one node through shared memory in /dev/shm',
    "nccl.watchdog-timeout": 'A collective waited for a rank that never joined it: that rank hung, crashed, called another collective (or other shapes), or the network between …',
    "openmp.duplicate-runtime": "two copies of Intel's OpenMP runtime are loaded into one process — typically one from conda's MKL (`Library/bin/libiomp5md.dll`, …",
    "probe.failed": 'a command the doctor asked hung or failed',
    "python.path-differs": "the `python` first on `PATH` is another environment (another venv, the system Python, conda's base) than the interpreter inspected",
    "python.torch-no-wheel": "pip lists, after `from versions`, the torch releases that have a file for this interpreter — its Python version, 32 or 64 bits, OS and CPU — …",
    "python.torch-shadowed": "a `torch` package earlier on `sys.path` than the installed one (a PyTorch source checkout in the current folder, another copy on `PYTHONPATH`) is the one `import torch` takes",
    "python.torch-missing": "the Python that ran the code has no torch: another environment's interpreter, or pip's isolated build environment for a package whose setup.py imports torch",
    "python.torch-extension-missing": "the installed torch holds no `_C` extension this interpreter loads (built for another Python, or missing), so `import torch` fails with \"Failed to load PyTorch C extensions\"",
    "requirement.unmet": 'a CI job (`--require`, or `[tool.doctor] require` in `pyproject.toml`) states what the build needs, and this machine does not have it',
    "rocm.arch-unsupported": 'a ROCm build carries kernels for a fixed list of gfx targets (`PYTORCH_ROCM_ARCH`)',
    "rocm.no-device": 'ROCm talks to the GPU through `/dev/kfd` and `/dev/dri/renderD*`',
    "smoke.device-unavailable": 'the device kind was asked for by name and this torch cannot use it: the build has no MPS backend (any non-macOS wheel), or the machine is not …',
    "smoke.failed": 'torch imports and sees the device, but real work on it fails or gives wrong numbers',
    "smoke.passed": 'this is the verdict of a device that trains',
    "system.sudo": "sudo runs the doctor as root with root's environment and home, so the report describes root's setup",
    "toolchain.compiler-missing": "libtorch programs, Hasktorch's C++ glue and tch-rs's `torch-sys` all compile C++",
    "version.mismatch": 'the binding or extension was built for another libtorch version than the one it found. tch-rs checks the version itself; a compiled extension …',
    "windows.crt-mismatch": "objects built against different MSVC runtimes (Debug vs Release, static vs DLL) linked together",
    "windows.dll-shadowed": "another torch's DLL earlier on the search order is loaded instead of this libtorch's",
    "windows.vc-runtime-missing": "the Visual C++ runtime DLLs libtorch imports are not installed",
    "build.stale-variant": "a cargo target/, cabal dist-newstyle/ or stack .stack-work/ was built against another libtorch (another tree, or CPU vs CUDA)",
    "hasktorch.relative-home": "LIBTORCH_HOME is empty, relative or keeps a literal ~: Hasktorch's Setup.hs resolves it from libtorch-ffi's folder",
    "hasktorch.not-cached": "the libtorch version Hasktorch asks for (LIBTORCH_VERSION) is not in its cache",
}


def family(finding_id: str) -> str:
    """"cuda.driver-too-old" → "cuda"."""
    return finding_id.split(".", 1)[0]


def meaning(finding_id: str) -> str | None:
    return FINDINGS.get(finding_id)


def is_known(finding_id: str) -> bool:
    return finding_id in FINDINGS
