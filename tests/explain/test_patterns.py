"""The pattern table: every regex is justified by real lines, and generalises beyond them.

The variants below are NOT fixture lines: other compilers, linkers, languages, locales, paths,
library names and versions, written in each tool's own message format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.explain.engine import explain_text
from doctor.explain.normalise import clean_line
from doctor.explain.patterns import RULES, TABLE

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "tests/fixtures/logs"
DIAGNOSES = [
    "headers.missing", "link.library-missing", "abi.mismatch", "loader.library-not-found", "glibc.too-old",
    "arch.mismatch", "version.mismatch", "cuda.driver-too-old", "cuda.arch-unsupported", "cuda.not-compiled",
    "link.as-needed", "cuda.no-device", "cxx.std-too-old", "macos.duplicate-rpath", "memory.oom",
]


def corpus_lines() -> set[str]:
    lines: set[str] = set()
    for path in LOGS.glob("*.log"):
        lines.update(path.read_text().splitlines())
    return lines


def test_the_table_covers_every_documented_id_and_each_has_a_docs_page():
    assert set(DIAGNOSES) <= set(RULES)
    for rule_id in RULES:
        page = REPO / "docs/findings" / f"{rule_id}.md"
        assert page.is_file(), f"no docs page for {rule_id}"
        text = page.read_text()
        for heading in ("What you see", "Why", "How the doctor knows", "Fix"):
            assert heading in text, f"{page.name} lacks '{heading}'"


def test_every_example_is_a_real_corpus_line_that_its_own_sign_matches():
    from doctor.explain.disambiguate import LOOK_ALIKES

    lines = corpus_lines()
    chosen_only = {pair.ids[1] for pair in LOOK_ALIKES if not RULES[pair.ids[1]].signs}
    assert chosen_only == {"python.torch-extension-missing"}  # reached only by a look-alike decision
    for rule in TABLE:
        if rule.id in chosen_only:
            continue
        assert any(s.examples for s in rule.signs), f"{rule.id} has no real example line"
        for sign in rule.signs:
            assert sign.examples or sign.basis, f"a sign of {rule.id} has neither a real line nor a basis"
            for example in sign.examples:
                assert example in lines, f"{rule.id}: example is not a line of tests/fixtures/logs: {example[:80]!r}"
                # the engine matches a line as normalise.clean_line leaves it (ASCII quotes, no runner prefix)
                assert sign.regex.search(clean_line(example)), f"{rule.id}: its sign does not match {example[:80]!r}"
                assert any(n in example for n in sign.needles), f"{rule.id}: no needle in {example[:80]!r}"


def test_index_sources_are_public_urls_or_local_builds():
    index = json.loads((LOGS / "index.json").read_text())
    for entry in index["logs"]:
        if entry["kind"] == "public":
            assert entry["source"].startswith("https://github.com/"), entry
        else:
            assert entry["kind"] == "local" and "build machine" in entry["source"], entry


VARIANTS = [
    # headers.missing: clang, MSVC, nvcc, German gcc, cabal, a Rust build script, a Windows path
    ("In file included from src/net.cpp:2:\n/home/ana/app/net.h:3:10: fatal error: 'ATen/ATen.h' file not found", "headers.missing"),
    ("C:\\src\\main.cpp(1): fatal error C1083: Cannot open include file: 'torch/script.h': No such file or directory", "headers.missing"),
    ('kernel.cu(2): catastrophic error: cannot open source file "torch/extension.h"', "headers.missing"),
    ("main.cpp:1:10: schwerwiegender Fehler: torch/torch.h: Datei oder Verzeichnis nicht gefunden", "headers.missing"),
    ("    * Missing (or bad) header file: torch/csrc/api/include/torch/torch.h", "headers.missing"),
    ("  cargo:warning=libtch/torch_api.h:2:10: fatal error: torch/torch.h: No such file or directory", "headers.missing"),
    ("\x1b[01m\x1b[Kapp.cc:1:10:\x1b[m\x1b[K \x1b[01;31m\x1b[Kfatal error: \x1b[m\x1b[Kc10/util/Optional.h: No such file or directory", "headers.missing"),
    # link.library-missing: lld, ld64, ld-prime, mold, gold, MSVC, stack
    ("ld.lld: error: unable to find library -ltorch_cpu", "link.library-missing"),
    ("ld: library not found for -lc10", "link.library-missing"),
    ("ld: library 'torch' not found", "link.library-missing"),
    ("mold: fatal: library not found: torch_cuda", "link.library-missing"),
    ("/usr/bin/ld.gold: error: cannot find -ltorch", "link.library-missing"),
    ("LINK : fatal error LNK1104: cannot open file 'C:\\libtorch\\lib\\torch_cpu.lib'", "link.library-missing"),
    ("    * Missing (or bad) C library: torch", "link.library-missing"),
    # abi.mismatch: lld's demangled form, a tch-rs note, an old-ABI mangled symbol at load time
    ("ld.lld: error: undefined symbol: c10::detail::torchCheckFail(char const*, char const*, unsigned int, "
     "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char>> const&)", "abi.mismatch"),
    ("          /home/u/x/intrusive_ptr.h:188: undefined reference to `c10::Error::Error(c10::SourceLocation, "
     "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)'", "abi.mismatch"),
    ("./app: symbol lookup error: ./app: undefined symbol: _ZN5torch3jit4loadERKSsN3c108optionalINS3_6DeviceEEE", "abi.mismatch"),
    ("main.o: in function `main': undefined reference to `at::native::something[abi:cxx11]()'", "abi.mismatch"),
    # version.mismatch: another tch version pair with a local tag, a no-string symbol, another torchvision op
    ("Error: this tch version expects PyTorch 2.1.0, got 2.1.2+cu121, this check can be bypassed", "version.mismatch"),
    ("ImportError: /venv/lib/python3.12/site-packages/torch_scatter/_scatter_cuda.so: undefined symbol: "
     "_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEE", "version.mismatch"),
    ("RuntimeError: operator torchvision::deform_conv2d does not exist", "version.mismatch"),
    # loader.library-not-found: other libraries, dyld's current form, Windows, the CUDA driver
    ("./main: error while loading shared libraries: libtorch_cuda_cu.so: cannot open shared object file: No such file or directory",
     "loader.library-not-found"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", "loader.library-not-found"),
    ("dyld[51234]: Library not loaded: @rpath/libc10.dylib", "loader.library-not-found"),
    ("The code execution cannot proceed because torch_cpu.dll was not found. Reinstalling the program may fix this problem.",
     "loader.library-not-found"),
    ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\Python311\\Lib\\site-packages'
     '\\torch\\lib\\c10.dll" or one of its dependencies.', "loader.library-not-found"),
    ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", "loader.library-not-found"),
    # glibc.too-old: straight quotes, CXXABI
    ("./app: /lib/x86_64-linux-gnu/libc.so.6: version 'GLIBC_2.34' not found (required by /opt/libtorch/lib/libtorch_cpu.so)",
     "glibc.too-old"),
    ("/usr/lib64/libstdc++.so.6: version `CXXABI_1.3.13' not found (required by /opt/libtorch/lib/libtorch_cpu.so)", "glibc.too-old"),
    # arch.mismatch: the other direction, a 32-bit loader error, Exec format error, Windows
    ("ld: warning: ignoring file '/opt/homebrew/lib/libtorch_cpu.dylib': found architecture 'arm64', required architecture 'x86_64'",
     "arch.mismatch"),
    ("OSError: /opt/libtorch/lib/libc10.so: wrong ELF class: ELFCLASS32", "arch.mismatch"),
    ("bash: ./libtorch_app: cannot execute binary file: Exec format error", "arch.mismatch"),
    ('OSError: [WinError 193] %1 is not a valid Win32 application. Error loading "C:\\venv\\torch\\lib\\c10.dll"', "arch.mismatch"),
    # cuda.*: other versions, GPUs, bindings
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 12020).", "cuda.driver-too-old"),
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version", "cuda.driver-too-old"),
    ("UserWarning: NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current PyTorch installation.",
     "cuda.arch-unsupported"),
    ("RuntimeError: Could not run 'aten::_to_copy' with arguments from the 'CUDA' backend.", "cuda.not-compiled"),
    ("Error: Torch(\"Could not run 'aten::empty.memory_format' with arguments from the 'CUDA' backend.\")", "cuda.not-compiled"),
    ('mnist: cannot move tensor from "CPU:0" to "CUDA:1"', "cuda.not-compiled"),
    ("RuntimeError: PyTorch is not linked with support for cuda devices", "cuda.not-compiled"),
    ("  what():  Cannot initialize CUDA without ATen_cuda library.", "link.as-needed"),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "cuda.no-device"),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].', "cuda.no-device"),
    # cxx.std-too-old: C++20 through clang's quoting, MSVC
    ('/opt/libtorch/include/torch/csrc/api/include/torch/all.h:4:2: error: "C++20 or later compatible compiler is required to use PyTorch."',
     "cxx.std-too-old"),
    ("c10/macros/Macros.h(7): fatal error C1189: #error:  You need C++17 to compile PyTorch", "cxx.std-too-old"),
    # memory.oom: other devices
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.", "memory.oom"),
    ("RuntimeError: MPS backend out of memory (MPS allocated: 17.2 GB, other allocations: 1.1 GB)", "memory.oom"),
    # cmake.torch-not-found
    ('CMake Error at CMakeLists.txt:3 (find_package):\n  Could not find a package configuration file provided by "Torch" with any of',
     "cmake.torch-not-found"),
    # python.torch-no-wheel: pip's words with a uv-style requirement, and a list pip could never print
    ("ERROR: Could not find a version that satisfies the requirement torch<2.0,>=1.12 (from versions: 2.5.0, 2.5.1)",
     "python.torch-no-wheel"),
    ("ERROR: Could not find a version that satisfies the requirement torch==x.y (from versions: a.b, none, 9999999999999999.0)",
     "python.torch-no-wheel"),
    # the distributed ids: the other wording, and the warning alone
    ("torch.distributed.DistStoreError: use_libuv was requested but PyTorch was built without libuv support, run with "
     "USE_LIBUV=0 to disable it.", "dist.no-libuv"),
    ("UserWarning: Attempted to get default timeout for nccl backend, but NCCL support is not compiled", "nccl.not-compiled"),
]


@pytest.mark.parametrize("text,expected", VARIANTS, ids=[f"{e}-{i}" for i, (_, e) in enumerate(VARIANTS)])
def test_variants_beyond_the_corpus(text, expected):
    assert [f.id for f in explain_text(text)] == [expected]


NOT_SETUP_PROBLEMS = [
    "fatal error: opencv2/core.hpp: No such file or directory",
    "/usr/bin/ld: cannot find -lopencv_core",
    "/usr/bin/ld: cannot find -ltorchvision",
    "undefined reference to `cv::imread(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, int)'",
    "./app: error while loading shared libraries: libopencv_core.so.4.5d: cannot open shared object file: No such file or directory",
    '  "c10::Device::Device(std::__1::basic_string<char, std::__1::char_traits<char>, std::__1::allocator<char>> const&)", referenced from:',
    "ld: warning: ignoring file libfoo.dylib, building for macOS-arm64 but attempting to link with file built for macOS-x86_64",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    "ValueError: Expected input batch_size (32) to match target batch_size (64).",
    "cat: build.log: No such file or directory",
    "cc1plus: out of memory allocating 65536 bytes after a total of 1073741824 bytes",
    "ImportError: /usr/lib/python3/dist-packages/cv2.so: undefined symbol: _ZN2cv6imreadERKNS_6StringEi",
    "g++ -D_GLIBCXX_USE_CXX11_ABI=0 -c main.cpp -o main.o",
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
    "ERROR: No matching distribution found for torchvision==0.99.0",
    "ERROR: Could not find a version that satisfies the requirement torch-scatter==2.1.2 (from versions: none)",
]


@pytest.mark.parametrize("text", NOT_SETUP_PROBLEMS)
def test_lines_that_are_not_setup_problems_yield_nothing(text):
    assert explain_text(text) == []
