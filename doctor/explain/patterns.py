"""What a log says, as data: one table of rules, one per diagnosis id, root cause first.

Each rule holds signs; a sign is a regex (compiled once, at its first use), the literal
needles a line must contain before the regex is tried (the engine finds all needles in one
pass, so a 10 MB log costs one scan, not a regex per line), and the real log lines that justify it,
copied verbatim from tests/fixtures/logs/ (sources in tests/fixtures/logs/index.json).
A sign with no real line yet names its `basis` instead (the tool whose message format it
reads); tests/explain/test_patterns.py holds the variants that keep it honest.

The table's order is the order findings are reported in: a cause before what it causes.
`explains` folds consequences into their cause (an x86_64 libtorch on arm64 also makes
every -ltorch "not found"; a duplicate LC_RPATH also makes dyld "not load" the library).
"""

from __future__ import annotations

import re
from functools import cached_property

from doctor import fixes
from doctor.record import record


@record(frozen=True)
class Sign:
    pattern: str
    needles: tuple[str, ...]
    examples: tuple[str, ...] = ()
    basis: str = ""  # where the message format comes from when no real line is in the corpus yet
    trigger: bool = True  # False: context only, adds facts to a finding that other signs raised

    @cached_property
    def regex(self) -> re.Pattern[str]:
        # compiled when a needle first hits: a run compiles the few signs its log touches, not
        # the table's ~250 (~60 ms of every `doctor explain`)
        return re.compile(self.pattern)


@record(frozen=True)
class Rule:
    id: str
    title: str  # generic title; doctor/explain/advice.py makes it concrete
    cause: str
    fix: str
    signs: tuple[Sign, ...]
    explains: tuple[str, ...] = ()


def sign(pattern: str, needles: str | tuple[str, ...], *examples: str, basis: str = "", trigger: bool = True) -> Sign:
    from doctor.explain.normalise import quote_variants

    needles = (needles,) if isinstance(needles, str) else needles
    # The regexes read lines with typographic quotes made ASCII; the needles meet the raw log.
    needles = tuple(dict.fromkeys(v for n in needles for v in quote_variants(n)))
    return Sign(pattern, needles, examples, basis, trigger)


# -- shared pieces --

# A header that ships in libtorch's include dirs (TH/THC are not: they were removed in 1.11).
HEADER = r"(?<![\w./\\+-])(?P<header>(?:torch|ATen|c10|caffe2)[\\/][\w./\\+-]*?\.(?:h|hpp|cuh))"
# gcc prints strerror() in the user's locale.
NO_SUCH_FILE = (
    "No such file or directory",
    "没有那个文件或目录",
    "Datei oder Verzeichnis nicht gefunden",
    "Aucun fichier ou dossier de ce type",
    "No existe el archivo o el directorio",
    "そのようなファイルやディレクトリはありません",
    "Нет такого файла или каталога",
)
_NO_SUCH = "(?:" + "|".join(map(re.escape, NO_SUCH_FILE)) + ")"
# -I~/x, -L~/x: a shell expands ~ only at the start of a word, so the compiler gets a folder named ~.
_TILDE_FLAG = r"(?<!\S)(?P<flag>-(?:I|L|isystem))(?P<tilde>~/[^\s'\"]*)"
_TILDE_BASIS = "bash, zsh and dash leave `-I~/lt/include` as it is (`echo -I~/x` prints -I~/x); gcc does not expand ~"
# libtorch's own libraries, as -l names ("torchvision" is not one: it needs the "_").
TORCH_LIB = r"(?P<lib>(?:torch|c10|caffe2|shm)(?:_\w+)?)\b"
# Mangled torch namespaces: c10, at, torch, caffe2, c10d.
_MANGLED_NS = r"(?:3c10|2at|5torch|6caffe2|4c10d)"
# A std::string in a mangled name: CXX11 (St7__cxx11, B5cxx11 abi tag) or the old ABI (Ss).
_MANGLED_STRING = r"(?:St7__cxx11|B5cxx11|Ss)"
# The types _GLIBCXX_USE_CXX11_ABI renames, in a demangled name: CXX11's std::__cxx11:: (string, list)
# and the [abi:cxx11] tag of a function returning one, or the old std::string.
_DEMANGLED_STRING = r"(?:std::__cxx11::|std::string\b|\[abi:cxx11\]|std::basic_string<)"
_CXX11_MARKS = ("__cxx11", "[abi:cxx11]", "St7__cxx11", "B5cxx11")


def symbol_abi(symbol: str) -> str | None:
    """The std::string ABI a (demangled or mangled) symbol names: 'cxx11', 'pre-cxx11', or None."""
    if any(mark in symbol for mark in _CXX11_MARKS):
        return "cxx11"
    if "std::string" in symbol or "std::basic_string<" in symbol or (symbol.lstrip("_").startswith("Z") and "Ss" in symbol):
        return "pre-cxx11"
    return None

# Libraries a libtorch program loads: libtorch's own, its OpenMP, CUDA runtime and driver.
LOADED_LIB = (
    r"(?P<lib>lib(?:torch\w*+|c10\w*+|caffe2\w*+|shm|gomp|iomp5|mklml|cuda|cudart|cublas\w*+|cudnn\w*+|cufft\w*+"
    r"|curand|cusolver\w*+|cusparse\w*+|nvrtc\w*+|nvJitLink|nvToolsExt|nccl|nvidia-ml|cupti|cufile\w*+)"
    r"[\w.+-]*?\.(?:so(?:\.[\d.]+)?|dylib))"
)
WINDOWS_DLL = r"(?<!\w)(?P<lib>(?:c10|torch|caffe2|shm|fbgemm|asmjit|uv|libiomp5md|cudart64|cublas64|cudnn64|nvrtc64)\w*+\.dll)"
# Lines about a torch file (keeps generic arch messages from other projects out).
_TORCHY = r"^(?=.*(?:torch|c10|caffe2))"


TABLE: tuple[Rule, ...] = (
    Rule(
        "arch.mismatch",
        "libtorch is built for another CPU architecture",
        "The libtorch the build or the loader found was compiled for another CPU (an x86_64 zip on "
        "Apple silicon or on aarch64 Linux, a 32-bit library on a 64-bit system).",
        "fetch the libtorch built for this machine (macOS: libtorch-macos-arm64-<V>.zip; aarch64 Linux: the "
        "PyTorch wheel's libtorch, there is no aarch64 zip)",
        (
            sign(_TORCHY + r".*?found architecture '(?P<found>\w+)', required architecture '(?P<required>\w+)'",
                 "found architecture",
                 "  = note: ld: warning: ignoring file '/Users/yangyang/micromamba/envs/tch-rs-demo/lib/python3.10/"
                 "site-packages/torch/lib/libtorch.dylib': found architecture 'x86_64', required architecture 'arm64'"),
            sign(_TORCHY + r".*?building for (?P<required>[\w.-]+) but attempting to link with file built for (?P<found>[\w.-]+)",
                 "attempting to link with file built for",
                 "ld: warning: ignoring file ../libtorch/lib/libtorch_cpu.dylib, building for macOS-arm64 but "
                 "attempting to link with file built for macOS-x86_64"),
            sign(_TORCHY + r".*?which is not the architecture being linked \((?P<required>\w+)\)",
                 "not the architecture being linked",
                 "ld: warning: ignoring file libtorch/lib/libc10.so, file was built for unsupported file format "
                 "( 0x7F 0x45 0x4C 0x46 0x02 0x01 0x01 0x03 0x00 0x00 0x00 0x00 0x00 0x00 0x00 0x00 ) which is not "
                 "the architecture being linked (x86_64): libtorch/lib/libc10.so"),
            sign(r"skipping incompatible (?=\S*?(?:torch|c10|caffe2))(?P<file>\S++) when searching for -l(?P<lib>\S++)",
                 "skipping incompatible",
                 "/usr/bin/ld: skipping incompatible /home/foobar/target/release/build/torch-sys-3b7ac5563a63a881/out/"
                 "libtorch/libtorch/lib/libtorch_cuda.so when searching for -ltorch_cuda"),
            sign(r"(?<!\S)(?=\S*?(?:torch|c10|caffe2))(?P<file>\S+?): error adding symbols: [Ff]ile in wrong format",
                 "in wrong format",
                 "/usr/bin/ld: /home/firefly/new/libtorch/lib/libtorch.so: error adding symbols: file in wrong format",
                 "libtorch/lib/libc10.so: error adding symbols: File in wrong format"),
            sign(r"(?<!\S)(?=\S*?(?:torch|c10|caffe2|libcuda|libnvidia))(?P<file>\S+?): wrong ELF class: (?P<elfclass>ELFCLASS\d+)",
                 "wrong ELF class", basis="glibc ld.so (dl-load.c): '<lib>: wrong ELF class: ELFCLASS32'"),
            sign(_TORCHY + r".*?incompatible architecture \(have \(?'?(?P<found>\w+)'?\)?, need \(?'?(?P<required>\w+)'?\)?\)",
                 "incompatible architecture",
                 "OSError: dlopen(/Users/masonjames/Sites/invokeai/.venv/lib/python3.10/site-packages/torch/lib/"
                 "libtorch_global_deps.dylib, 0x000A): tried: '/Users/masonjames/Sites/invokeai/.venv/lib/python3.10/"
                 "site-packages/torch/lib/libtorch_global_deps.dylib' (mach-o file, but is an incompatible architecture "
                 "(have 'x86_64', need 'arm64')), '/System/Volumes/Preboot/Cryptexes/OS/Users/masonjames/Sites/invokeai/"
                 ".venv/lib/python3.10/site-packages/torch/lib/libtorch_global_deps.dylib' (no such file), '/Users/"
                 "masonjames/Sites/invokeai/.venv/lib/python3.10/site-packages/torch/lib/libtorch_global_deps.dylib' "
                 "(mach-o file, but is an incompatible architecture (have 'x86_64', need 'arm64'))"),
            sign(_TORCHY + r".*Exec format error", "Exec format error",
                 basis="execve(2) ENOEXEC as printed by shells and Python: 'cannot execute binary file: Exec format error'"),
            sign(_TORCHY + r".*is not a valid Win32 application", "not a valid Win32 application",
                 basis="Windows ERROR_BAD_EXE_FORMAT: '%1 is not a valid Win32 application'"),
        ),
        explains=("link.library-missing", "abi.mismatch", "version.mismatch", "loader.library-not-found"),
    ),
    Rule(
        "glibc.too-old",
        "the system's glibc or libstdc++ is older than libtorch needs",
        "libtorch was built against a newer C library or C++ runtime than this system (or this conda "
        "environment) has: from 2.7 libtorch is built on manylinux_2_28 (glibc 2.28).",
        "a newer OS or libstdc++ (a newer gcc, or conda's libstdcxx-ng), or an older libtorch",
        (
            sign(r"(?:(?<!\S)(?P<from>\S*?lib(?:c|m|stdc\+\+|pthread|dl|rt|gcc_s)\.so\.\d++): )?version [`'‘](?P<need>(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+)['’] not found"
                 r"(?: \(required by (?P<by>[^)]+)\))?",
                 # the version too: a word wrap can put "not found" on the next line (read joined)
                 ("' not found", "’ not found", "version `GLIBC", "version 'GLIBC", "version `CXXABI", "version 'CXXABI"),
                 "/lib64/libm.so.6: version `GLIBC_2.23' not found (required by /home/centos/libtorch_cpu.so)",
                 "ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by "
                 "/home/***/lib/python3.10/site-packages/torch/lib/libtorch_python.so)"),
            sign(r"undefined reference to [`'‘][^'’`]*@(?P<need>(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+)['’`]",
                 ("@GLIBC", "@CXXABI"),
                 "abacus-develop/libtorch/lib/libtorch_cpu.so: undefined reference to 'powf@GLIBC_2.27'",
                 "/data/username/workspace/torch_cxx_test/libtorch/lib/libc10.so: undefined reference to "
                 "`std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::~basic_string()"
                 "@GLIBCXX_3.4.21'"),
        ),
        explains=("abi.mismatch", "loader.library-not-found"),
    ),
    Rule(
        "glibc.missing",
        "libtorch is built for glibc, and this system's C library is musl",
        "Every official libtorch and torch wheel is built for glibc; musl's loader (Alpine and other musl "
        "systems) finds no ld-linux-*.so.2 and none of glibc's own functions, so nothing of torch loads.",
        fixes.glibc_system(),
        (
            # musl's dynamic loader words (ldso/dynlink.c): a glibc program names ld-linux as needed
            sign(r"Error loading shared library ld-linux-[\w-]+\.so\.\d: No such file or directory",
                 "Error loading shared library ld-linux",
                 "ImportError: Error loading shared library ld-linux-x86-64.so.2: No such file or directory (needed by /usr/",
                 "! /usr/lib/R/library/torch/lib/liblantern.so - Error loading shared library ld-linux-x86-64.so.2: No such "
                 "file or directory (needed by /usr/lib/R/library/torch/lib/liblantern.so) "),
            sign(r"Error relocating (?P<by>\S+?): (?P<symbol>[^\s:]+)", "Error relocating",
                 "OSError: Error relocating /usr/local/lib/python3.9/site-packages/torch/lib/libgomp-a34b3233.so.1: "
                 "pthread_attr_setaffinity_np: symbol not found",
                 "ImportError: Error relocating /usr/lib/python3.5/site-packages/torch/lib/libcudnn.so.6: __strtod_internal:"),
        ),
        explains=("link.library-missing", "loader.library-not-found", "glibc.too-old"),
    ),
    Rule(
        "loader.map-failed",
        "the loader found a library but could not map it into memory",
        "ld.so opened the file, but the kernel refused to map it: the file lies on a file system mounted "
        "noexec (/tmp, /dev/shm or a hardened home: 'Operation not permitted'), or the process runs under an "
        "address-space limit (ulimit -v on a login node or a shared host: 'Cannot allocate memory') smaller "
        "than the libraries; libtorch_cuda.so alone maps over a gigabyte. Older glibc adds the reason, newer does not.",
        fixes.unmappable_library(None, None),
        (
            sign(r"(?P<lib>[^\s:'\"]+): failed to map segment from shared object"
                 r"(?:: (?P<why>Operation not permitted|Cannot allocate memory))?",
                 "failed to map segment from shared object",
                 "ImportError: libgcc_s.so.1: failed to map segment from shared object",
                 "ImportError: libtorch_cuda.so: failed to map segment from shared object"),
        ),
    ),
    Rule(
        "macos.duplicate-rpath",
        "a binary carries the same LC_RPATH twice, which dyld rejects",
        "Two build layers each add the same -rpath (for example cabal's extra-lib-dirs and an -optl "
        "rpath, or LDFLAGS given twice); current dyld refuses to load such a binary.",
        "drop one of the layers adding the rpath; fix a built binary with install_name_tool -delete_rpath",
        (
            sign(r"duplicate LC_RPATH '(?P<path>[^']+)'", "duplicate LC_RPATH",
                 "  dyld: duplicate LC_RPATH '~/.cache/libtorch/2.9.1/macos-arm64/cpu/lib'",
                 "ld: duplicate LC_RPATH '@loader_path' in '/Users/gitlab-runner-1/builds/t1_sCcQTt/0/spack/spack/opt/"
                 "spack/[padded-to-256-chars]/darwin-aarch64/py-torch-2.6.0-kmyjnfnzeb5j3p73a5fndjqtbaltrxho/lib/"
                 "python3.12/site-packages/torch/lib/libtorch_cpu.dylib'"),
            sign(r"would duplicate path, file already has LC_RPATH for: (?P<path>\S+)", "would duplicate path",
                 "error: /Applications/Xcode.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/bin/"
                 "install_name_tool: for: /Volumes/llv24macOS/git_projects/ml/pytorch/torch/lib/tmp_install/test/"
                 "conv_op_cache_cudnn_test (for architecture x86_64) option \"-add_rpath /usr/local/cuda/lib\" would "
                 "duplicate path, file already has LC_RPATH for: /usr/local/cuda/lib"),
        ),
        explains=("loader.library-not-found",),
    ),
    Rule(
        "libtorch.not-found",
        "the build found no libtorch",
        "tch-rs's build script (torch-sys 0.14 and later) takes libtorch from LIBTORCH, else from the Python torch "
        "when LIBTORCH_USE_PYTORCH=1, else from a system-wide /usr/lib/libtorch.so, and downloads one only with the "
        "download-libtorch feature; none of these was there.",
        f"{fixes.FETCH}   (or, with a PyTorch installed in this Python: export LIBTORCH_USE_PYTORCH=1)",
        (
            sign(r"Cannot find a libtorch install, you can either", "Cannot find a libtorch install",
                 "  Cannot find a libtorch install, you can either:"),
        ),
    ),
    Rule(
        "cmake.torch-not-found",
        "CMake cannot find libtorch (TorchConfig.cmake)",
        "find_package(Torch) searches CMAKE_PREFIX_PATH and Torch_DIR; neither names a libtorch.",
        "cmake -DCMAKE_PREFIX_PATH=<libtorch root> .. (or Torch_DIR=<root>/share/cmake/Torch)",
        (
            sign(r"Could not find a package configuration file provided by \"(?P<package>Torch|Caffe2)\"",
                 ('provided by "Torch"', 'provided by "Caffe2"'),
                 "  Could not find a package configuration file provided by \"Torch\" with any of"),
            sign(r"By not providing \"Find(?P<package>Torch|Caffe2)\.cmake\"", ("FindTorch.cmake", "FindCaffe2.cmake"),
                 "  By not providing \"FindTorch.cmake\" in CMAKE_MODULE_PATH this project has"),
        ),
    ),
    Rule(
        "cxx.std-too-old",
        "the compiler runs in an older C++ standard than libtorch needs",
        "libtorch's headers refuse to compile below their C++ standard (C++17; C++20 from 2.13).",
        "-std=c++17 (libtorch ≥ 2.13: -std=c++20), or a newer gcc/clang",
        (
            sign(r"[Cc]\+\+(?P<std>\d\d) or later compatible compiler is required to use (?P<what>\w+)",
                 "compatible compiler is required",
                 "/public/home/miniconda3/envs/oneformer3d/lib/python3.8/site-packages/torch/include/torch/csrc/api/"
                 "include/torch/all.h:4:2: error: #error C++17 or later compatible compiler is required to use PyTorch.",
                 "libtorch/include/ATen/ATen.h:4:2: error: #error C++17 or later compatible compiler is required to use ATen."),
            sign(r"You need C\+\+(?P<std>\d\d) to compile PyTorch", "to compile PyTorch",
                 basis="libtorch's c10/macros/Macros.h on MSVC: 'error C1189: #error: You need C++17 to compile PyTorch'"),
        ),
    ),
    Rule(
        "headers.missing",
        "libtorch headers not found",
        "libtorch is not installed, or the include path lacks one of its two include dirs: "
        "<root>/include and <root>/include/torch/csrc/api/include.",
        "add both include dirs (CPLUS_INCLUDE_PATH, -I, cabal --extra-include-dirs), or fetch libtorch",
        (
            sign(HEADER + r"['\"]?\s*:\s*" + _NO_SUCH, NO_SUCH_FILE,
                 "torch.cpp:3:10: fatal error: torch/torch.h: No such file or directory",
                 " \tfatal error: torch/types.h: No such file or directory",
                 "fatal error: torch/extension.h: 没有那个文件或目录"),
            sign(r"'" + HEADER + r"' file not found", "file not found",
                 "torch.cpp:3:10: fatal error: 'torch/torch.h' file not found"),
            sign(r"Cannot open include file: '" + HEADER + "'", "Cannot open include file",
                 basis="MSVC C1083: \"fatal error C1083: Cannot open include file: 'torch/torch.h': No such file or directory\""),
            sign(r"cannot open source file \"" + HEADER + '"', "cannot open source file",
                 basis='nvcc / EDG front ends: \'catastrophic error: cannot open source file "torch/extension.h"\''),
            sign(r"Missing \(or bad\) header files?: .*?" + HEADER, "Missing (or bad) header",
                 basis="Cabal's configure check: '* Missing (or bad) header file: torch/torch.h'"),
            sign(_TILDE_FLAG, ("-I~/", "-isystem~/"), basis=_TILDE_BASIS, trigger=False),
        ),
    ),
    Rule(
        "link.library-missing",
        "the linker cannot find libtorch's libraries",
        "The library directory of libtorch was not given to the linker.",
        "LIBRARY_PATH / -L<root>/lib / cabal --extra-lib-dirs",
        (
            sign(r"cannot find -l" + TORCH_LIB, "cannot find -l",
                 "/home/anaconda3/compiler_compat/ld: cannot find -lc10",
                 "/home/share/lihaoyu/anaconda3/envs/sas/compiler_compat/ld: cannot find -ltorch_cpu: not found"),
            sign(r"unable to find library -l" + TORCH_LIB, "unable to find library -l",
                 basis="LLVM lld: 'ld.lld: error: unable to find library -ltorch'"),
            sign(r"library not found for -l" + TORCH_LIB, "library not found for -l",
                 basis="Apple ld64: 'ld: library not found for -ltorch' (the same format as pytorch-dist#55's -lTH)"),
            sign(r"library '" + TORCH_LIB + r"' not found", "library '",
                 basis="Apple ld-prime (Xcode 15+): \"ld: library 'torch' not found\""),
            sign(r"library not found: " + TORCH_LIB, "library not found: ",
                 basis="mold: 'mold: fatal: library not found: torch'"),
            sign(r"LNK1104: cannot open file '(?:[^']*[\\/])?" + TORCH_LIB + r"\.lib'", "LNK1104",
                 basis="MSVC link.exe: \"LINK : fatal error LNK1104: cannot open file 'torch.lib'\""),
            sign(r"Missing \(or bad\) C librar(?:y|ies): (?P<libs>.*\b(?:torch|c10)\b.*)", "Missing (or bad) C librar",
                 "* Missing (or bad) C libraries: c10, torch"),
            sign(_TILDE_FLAG, "-L~/", basis=_TILDE_BASIS, trigger=False),
        ),
        explains=("abi.mismatch", "version.mismatch"),
    ),
    Rule(
        "abi.mismatch",
        "C++ ABI mismatch between the program and libtorch",
        "The program was compiled with a different _GLIBCXX_USE_CXX11_ABI than libtorch, so every "
        "function taking a std::string has another name on each side.",
        "compile with -D_GLIBCXX_USE_CXX11_ABI=<libtorch's value>, or fetch the other ABI build (≤ 2.6 only)",
        (
            sign(r"undefined (?:reference to|symbol:) [`'‘\"]?(?P<symbol>(?:c10|at|torch|caffe2|c10d)::[^`'’\"@]*?"
                 + _DEMANGLED_STRING + r"[^`'’\"@]*)(?:[`'’\"]|\s*$)",
                 ("undefined reference to", "undefined symbol: "),
                 "error: undefined reference to `c10::Error::Error(std::__cxx11::basic_string<char, std::char_traits<char>, "
                 "std::allocator<char> > const&, std::__cxx11::basic_string<char, std::char_traits<char>, "
                 "std::allocator<char> > const&, void const*)'",
                 "torch_infer.cpp:(.text+0x7aa): undefined reference to `c10::Error::Error(c10::SourceLocation, std::string const&)'"),
            sign(r"(?:undefined symbol|symbol not found)\W+(?P<symbol>_?_ZNK?" + _MANGLED_NS + r"(?=\w*" + _MANGLED_STRING + r")\w+)",
                 ("undefined symbol", "symbol not found"),
                 "OSError: /models/FasterTransformer/build/lib/libth_transformer.so: undefined symbol: "
                 "_ZN5torch3jit17parseSchemaOrNameERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
                 "ImportError: /opt/pyenv/lib/python3.12/site-packages/nvfuser/_C.cpython-312-x86_64-linux-gnu.so: "
                 "undefined symbol: _ZN4c10d8TCPStoreC1ESsRKNS_15TCPStoreOptionsE"),
            # A torch symbol that names none of those types: context, read by disambiguate.not_linked (a CXX11
            # program's such symbols have the same name under both ABIs: libtorch is not on the link line).
            sign(r"undefined (?:reference to|symbol:) [`'‘\"]?(?P<unmarked>(?:c10|at|torch|caffe2|c10d)::"
                 r"(?:(?!" + _DEMANGLED_STRING + r")[^`'’\"@])*+)(?:[`'’\"]|\s*$)",
                 ("undefined reference to", "undefined symbol: "),
                 "torch_infer.cpp:(.text+0x12ef): undefined reference to `c10::Error::msg() const'", trigger=False),
            # The flag on the command line: context for the finding, never a finding by itself.
            # Greedy .* takes the last -D on the line: the one the compiler obeys (^: one start per line, not one per byte).
            sign(r"^.*-D_GLIBCXX_USE_CXX11_ABI=(?P<flag>[01])\b", "_GLIBCXX_USE_CXX11_ABI=",
                 "-D_GLIBCXX_USE_CXX11_ABI=1", trigger=False),
        ),
    ),
    Rule(
        "version.mismatch",
        "built for another libtorch version",
        "The binding or extension was built for a different libtorch version than the one it found.",
        "use the libtorch version it expects, or rebuild it against this one",
        (
            sign(r"this tch version expects PyTorch (?P<expected>\d+\.\d+(?:\.\d+)?), got (?P<got>\d+\.\d+(?:\.\d+)?[\w+.]*?)(?=[,\s]|$)",
                 "this tch version expects",
                 "  Error: this tch version expects PyTorch 2.5.0, got 2.5.1, this check can be bypassed by setting the "
                 "LIBTORCH_BYPASS_VERSION_CHECK environment variable"),
            sign(r"undefined symbol:\s+(?P<symbol>_?_ZNK?" + _MANGLED_NS + r"(?:(?!" + _MANGLED_STRING + r")\w)+)(?!\w)",
                 "undefined symbol:",
                 "  undefined symbol: _ZN3c104impl3cow23materialize_cow_storageERNS_11StorageImplE",
                 "ImportError: /usr/local/lib/python3.6/dist-packages/torchvision/_C.cpython-36m-x86_64-linux-gnu.so: "
                 "undefined symbol: _ZN2at7getTypeERKNS_6TensorE"),
            # macOS dyld's words for the same: a Mach-O name carries one more leading underscore (__ZN…).
            sign(r"[Ss]ymbol not found(?: in flat namespace)?:?\s+'?(?P<symbol>__ZNK?" + _MANGLED_NS
                 + r"(?:(?!" + _MANGLED_STRING + r")\w)+)(?!\w)",
                 ("symbol not found in flat namespace", "Symbol not found:"),
                 "ImportError: dlopen(/opt/homebrew/anaconda3/envs/vis/lib/python3.8/site-packages/mmcv/"
                 "_ext.cpython-38-darwin.so, 0x0002): symbol not found in flat namespace '__ZN2at3mps9MPSStream6commitEb'",
                 "Failed to install Torch, manually run install_torch(). /Library/Frameworks/R.framework/Versions/4.0/Resources/"
                 "library/torch/deps/liblantern.dylib - dlopen(/Library/Frameworks/R.framework/Versions/4.0/Resources/"
                 "library/torch/deps/liblantern.dylib, 10): Symbol not found: __ZN2at10__lshift__ERKNS_6TensorEN3c106ScalarE"),
            sign(r"operator (?P<op>torchvision::\w+) does not exist", "does not exist",
                 "RuntimeError: operator torchvision::nms does not exist"),
            sign(r"No such operator (?P<op>torchvision::\w+)", "No such operator",
                 basis="torchvision < 0.6 on a mismatched torch: 'RuntimeError: No such operator torchvision::nms'"),
            # THC/TH were removed from PyTorch in 1.11: the code needs an older libtorch.
            sign(r"(?P<header>THC?/TH\w*\.h)['\"]?\s*(?::\s*" + _NO_SUCH + r"|file not found)", ("THC/", "TH/"),
                 "fatal error: THC/THC.h: No such file or directory",
                 "_temporal_convolution_tbc.cpp:434:10: fatal error: 'THC/THC.h' file not found"),
        ),
    ),
    Rule(
        "loader.library-not-found",
        "the loader cannot find a library at run time",
        "The program was built, but at run time the dynamic loader finds neither libtorch nor the "
        "library named (no LD_LIBRARY_PATH / DYLD_LIBRARY_PATH / PATH entry, no RPATH).",
        "LD_LIBRARY_PATH / DYLD_LIBRARY_PATH / PATH, or link with an rpath",
        (
            sign(LOADED_LIB + r": cannot open shared object file", "cannot open shared object file",
                 "hasktorch/.stack-work/install/x86_64-linux/e57d0afa7abbf44e537c5d4ed24d3e564303be076ac7c663c9dbbeb1b641e1c6/"
                 "8.6.5/bin/regression: error while loading shared libraries: libc10.so: cannot open shared object file: "
                 "No such file or directory",
                 "OSError: libtorch_cpu.so: cannot open shared object file: No such file or directory"),
            sign(r"Library not loaded: (?:@rpath/|@loader_path/|@executable_path/|(?>\S*/))?" + LOADED_LIB, "Library not loaded",
                 "dyld: Library not loaded: @rpath/libmklml.dylib",
                 "dlopen(/Users/user/opt/anaconda3/lib/python3.8/site-packages/torch/_C.cpython-38-darwin.so, 0x0002): "
                 "Library not loaded: @rpath/libtorch_cpu.dylib"),
            sign(r"(?:Could not find module '|Error loading \")(?:[^'\"]*[\\/])?" + WINDOWS_DLL,
                 ("Could not find module", 'Error loading "'),
                 "FileNotFoundError: Could not find module '...\\c10.dll' (or one of its dependencies)"),
            sign(WINDOWS_DLL + r" was not found", "was not found",
                 basis="Windows loader dialog: 'The code execution cannot proceed because c10.dll was not found.'"),
        ),
    ),
    Rule(
        "link.as-needed",
        "libtorch_cuda was dropped at link time (--as-needed)",
        "The linker's --as-needed removed libtorch_cuda because the program uses none of its symbols "
        "directly; CUDA then fails to initialise at run time.",
        "link with -Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed (CMake: link the Torch target)",
        (
            sign(r"[Cc]annot initialize CUDA without ATen_cuda library", "ATen_cuda library",
                 "  what():  cannot initialize CUDA without ATen_cuda library (initCUDA at /home/pharrell/downloads/ATen/"
                 "aten/src/ATen/detail/CUDAHooksInterface.h:42)"),
        ),
        explains=("cuda.not-compiled",),
    ),
    Rule(
        "cuda.no-device",
        "no usable NVIDIA GPU: the driver is not loaded or the GPU is hidden",
        "No driver is loaded, the GPU was not passed into the container, this user may not open /dev/nvidia* "
        "(nvidia-smi: Insufficient Permissions), or CUDA_VISIBLE_DEVICES hides it.",
        "install/load the driver (nvidia-smi must work); docker run --gpus all; check CUDA_VISIBLE_DEVICES",
        (
            sign(r"no CUDA-capable device is detected", "CUDA-capable device",
                 "RuntimeError: cuda runtime error (38) : no CUDA-capable device is detected at "
                 "/pytorch/aten/src/THC/THCGeneral.cpp:74"),
            sign(r"No CUDA GPUs are available", "No CUDA GPUs are available", "RuntimeError: No CUDA GPUs are available"),
            sign(r"NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver",
                 "communicate with the NVIDIA driver",
                 "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
                 "NVIDIA driver is installed and running."),
            sign(r"Found no NVIDIA driver on your system", "Found no NVIDIA driver",
                 "Found no NVIDIA driver on your system. Please check that you",
                 "CudaWarning: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                 "installed a driver from http://www.nvidia.com/Download/index.aspx"),
            # NVIDIA/nvidia-container-toolkit#210 (rootless podman), #33 (SELinux), nvidia-docker#676
            sign(r"Failed to initialize NVML: Insufficient Permissions", "Insufficient Permissions",
                 "Failed to initialize NVML: Insufficient Permissions"),
            sign(r"could not select device driver \"[^\"]*\" with capabilities: \[\[gpu\]\]", "with capabilities: [[gpu]]",
                 basis="docker without the NVIDIA Container Toolkit: 'could not select device driver \"\" with capabilities: [[gpu]]'"),
        ),
    ),
    Rule(
        "cuda.driver-too-old",
        "the NVIDIA driver is older than this build's CUDA needs",
        "The driver is below the floor of the CUDA line libtorch was built with.",
        "upgrade the driver, or fetch a cuXYZ variant the driver supports",
        (
            sign(r"NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)", "driver on your system is too old",
                 "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU "
                 "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
                 "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
                 "version of the CUDA driver.",
                 "The NVIDIA driver on your system is too old (found version 9000)."),
            sign(r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver",
                 ("driver version is insufficient", "cudaErrorInsufficientDriver"),
                 "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"),
        ),
    ),
    Rule(
        "cuda.not-compiled",
        "a CPU-only libtorch was asked for CUDA",
        "The libtorch (or torch) in use offers no CUDA backend: a CPU build does not have one (a CUDA build "
        "whose libtorch_cuda the linker dropped looks the same: link.as-needed).",
        "fetch a cuXYZ variant",
        (
            sign(r"Torch not compiled with CUDA enabled", "not compiled with CUDA enabled",
                 "AssertionError: Torch not compiled with CUDA enabled"),
            sign(r"Could not run '(?P<op>[\w:.]+)' with arguments from the '(?P<backend>\w*CUDA)' backend",
                 "with arguments from the '",
                 "    Internal torch error: Could not run 'aten::empty.memory_format' with arguments from the 'CUDA' backend. "
                 "This could be because the operator doesn't exist for this backend, or was omitted during the "
                 "selective/custom build process (if using custom build). If you are a Facebook employee using PyTorch on "
                 "mobile, please visit https://fburl.com/ptmfixes for possible resolutions. 'aten::empty.memory_format' is "
                 "only available for these backends: [CPU, Meta, MkldnnCPU, SparseCPU, BackendSelect, Named, "
                 "ADInplaceOrView, AutogradOther, AutogradCPU, AutogradCUDA, AutogradXLA, UNKNOWN_TENSOR_TYPE_ID, "
                 "AutogradMLC, AutogradHPU, AutogradNestedTensor, AutogradPrivateUse1, AutogradPrivateUse2, "
                 "AutogradPrivateUse3, Tracer, Autocast, Batched, VmapMode]."),
            sign(r"cannot move tensor from \"(?P<source>[\w:]+)\" to \"(?P<target>CUDA[\w:]*)\"", "cannot move tensor from",
                 "static-mnist-cnn: cannot move tensor from \"CPU:0\" to \"CUDA:0\""),
            sign(r"PyTorch is not linked with support for cuda devices", "is not linked with support for",
                 basis="torch ≥ 2.1 CPU build: 'RuntimeError: PyTorch is not linked with support for cuda devices'"),
        ),
    ),
    Rule(
        "cuda.arch-unsupported",
        "this GPU's compute capability is not in the build",
        "The libtorch/torch build carries no kernels for this GPU's compute capability.",
        "fetch a variant built for it (cu128+ for 10.0/12.0; cu126 for 5.x–6.x)",
        (
            sign(r"(?:^|:\s)(?P<gpu>[^:]*?) with CUDA capability (?P<sm>sm_\d+) is not compatible with the current PyTorch installation",
                 "is not compatible with the current PyTorch installation",
                 "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
                 "NVIDIA RTX A6000 with CUDA capability sm_86 is not compatible with the current PyTorch installation."),
            sign(r"supports CUDA capabilities (?P<supported>(?:(?:sm|compute)_\d+\s*)+)", "supports CUDA capabilities",
                 "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.",
                 trigger=False),
            sign(r"no kernel image is available for execution on the device", "no kernel image is available",
                 "RuntimeError: CUDA error: no kernel image is available for execution on the device"),
            sign(r"Found GPU(?P<index>\d+) (?P<gpu>.+?) which is of cuda capability (?P<capability>\d+\.\d+)",
                 "which is of cuda capability", "    Found GPU0 GeForce 820M which is of cuda capability 2.1."),
            sign(r"PyTorch no longer supports this GPU because it is too old", "no longer supports this GPU",
                 "    PyTorch no longer supports this GPU because it is too old."),
        ),
    ),
    Rule(
        "memory.oom",
        "out of memory",
        "The work does not fit in the device's (or the machine's) memory.",
        "a smaller batch; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
        (
            sign(r"(?P<device>CUDA|HIP|MPS backend|XPU) out of memory(?:\. Tried to allocate (?P<amount>[\d.]+ [KMGT]?i?B))?",
                 "out of memory",
                 "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of "
                 "6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB "
                 "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                 "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
                 "PYTORCH_CUDA_ALLOC_CONF"),
            sign(r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to allocate (?P<bytes>\d+)",
                 "DefaultCPUAllocator",
                 "RuntimeError: [enforce fail at alloc_cpu.cpp:73] . DefaultCPUAllocator: can't allocate memory: you tried "
                 "to allocate 116813856768 bytes. Error code 12 (Cannot allocate memory)"),
            sign(r"total capac(?:i)?ty of (?P<total>[\d.]+ [KMGT]i?B) of which (?P<free>[\d.]+ (?:[KMGT]i?B|bytes)) is free",
                 "is free",
                 "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total capacty "
                 "of 14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Of the allocated "
                 "memory 14.06 GiB is allocated by PyTorch, and 330.42 MiB is reserved by PyTorch but unallocated. If "
                 "reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See "
                 "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
                 trigger=False),
            sign(r"(?<![\d.])(?P<total>[\d.]++ [KMGT]iB) total capacity; .*?(?<![\d.])(?P<free>[\d.]++ [KMGT]?i?B) free", "total capacity",
                 "RuntimeError:CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity; 4.36 GiB "
                 "already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)",
                 trigger=False),
        ),
    ),
)

# -- distributed (torch.distributed, NCCL, gloo): `doctor fleet` checks these before a job --
# Kept as one block at the end of the table: these are run-time failures of a multi-process
# job, reported after the build and loader causes above.
DISTRIBUTED: tuple[Rule, ...] = (
    Rule(
        "nccl.not-compiled",
        "this torch has no NCCL, and the job asked for the nccl backend",
        "NCCL comes only with torch's CUDA builds for Linux: the Windows and macOS builds and every CPU build have "
        "none (torch.distributed.is_nccl_available() is False there), so init_process_group with the nccl backend "
        "stops before any rank meets another. On a Linux machine with NVIDIA GPUs it means a CPU build of torch.",
        "on Windows, macOS or a machine without an NVIDIA GPU use the gloo backend (init_process_group(\"gloo\"), or "
        "the training tool's backend setting); one GPU needs no process group at all. On Linux with NVIDIA GPUs install "
        "a CUDA build of torch (`doctor check` names the variant that fits the driver); under Windows, WSL 2 runs the "
        "Linux builds",
        (
            sign(r"Distributed package doesn't have NCCL built in", "doesn't have NCCL built in",
                 "RuntimeError: Distributed package doesn't have NCCL built in"),
            sign(r"Attempted to get default timeout for nccl backend, but NCCL support is not compiled",
                 "NCCL support is not compiled",
                 basis="`Attempted to get default timeout for nccl backend, but NCCL support is not compiled`: "
                       "torch/distributed/distributed_c10d.py's warning when the nccl backend is asked of a torch "
                       "without NCCL (torch 2.13)"),
            # where the log came from: a traceback through a Windows install of torch, or the
            # launcher naming a Windows python.exe (the advice then speaks of Windows alone)
            sign(r"(?<![^\s\"'(])(?P<windows_path>[A-Za-z]:\\\S*?\\(?:torch\\(?:distributed|multiprocessing)\\|"
                 r"pythonw?\.exe(?!\S)))",
                 ("\\torch\\distributed\\", "\\torch\\multiprocessing\\", "python.exe", "pythonw.exe"),
                 '  File "C:\\Users\\egora\\AppData\\Local\\Programs\\Python\\Python38\\lib\\site-packages\\torch\\'
                 'multiprocessing\\spawn.py", line 74, in _wrap',
                 "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 27316) of "
                 "binary: C:\\anaconda\\envs\\clip\\python.exe",
                 trigger=False),
        ),
    ),
    Rule(
        "dist.version-mismatch",
        "the ranks run different NCCL (torch) releases",
        "Every rank of an NCCL communicator must run the same NCCL release; a node with another torch wheel (each "
        "carries its NCCL), another nvidia-nccl-cu* package or a system libnccl first on LD_LIBRARY_PATH brings another "
        "one. NCCL refuses the communicator when it sees the versions differ, and otherwise reads its peers' bootstrap "
        "messages wrong.",
        fixes.same_versions_on_every_node(),
        (
            sign(r"Mismatched NCCL version detected : rank (?P<rank_a>\d+) version (?P<nccl_a>\d+) "
                 r"rank (?P<rank_b>\d+) version (?P<nccl_b>\d+)",
                 "Mismatched NCCL version detected",
                 "RuntimeError: Mismatched NCCL version detected : rank 1 version 22705 rank 0 version 22703"),
            # Family 0 is an all-zero peer address: the bootstrap message came from a peer whose NCCL lays it out
            # otherwise (NVIDIA/nccl#1267: 2.20.5 on one node, 2.19.3 on the others). Other families (1 = AF_UNIX,
            # garbage numbers) come from other bugs and are not read here.
            sign(r"ncclSocketInit: connecting to address +(?:\S+ +)?with family 0 is neither AF_INET",
                 "with family 0 is neither AF_INET",
                 "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor AF_INET6(10)"),
        ),
    ),
    Rule(
        "nccl.system-error",
        "NCCL could not create its shared-memory segment",
        "NCCL's 'unhandled system error' here comes from /dev/shm: too small (Docker's default is 64 MB), "
        "full of stale nccl-* segments, or not writable.",
        "docker run --shm-size=16g (or --ipc=host); Kubernetes: an emptyDir with medium: Memory at /dev/shm; "
        "remove stale /dev/shm/nccl-*; NCCL_SHM_DISABLE=1 only as a slower stopgap. `doctor fleet` shows each node's /dev/shm",
        (
            sign(r"NCCL WARN (?:Call to (?P<call>shm_open|posix_fallocate) failed : (?P<why>[^\n]+)"
                 r"|Error while creating shared memory segment (?P<segment>\S+)"
                 r"|Error: failed to extend (?P<extend>/dev/shm/\S+))",
                 "NCCL WARN",
                 "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied",
                 "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
                 "simple-layoutlm-mmml-1573-investigate-how-to-implement-d-lcbz2t:97:183 [0] include/shm.h:48 NCCL WARN "
                 "Error while creating shared memory segment nccl-shm-recv-c43b846667d22574-1-1-0 (size 9637888)",
                 "[2026-04-22 21:34:20] mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow:202016:202235 [0] "
                 "misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: "
                 "No space left on device (28)"),
            sign(r"unhandled system error(?:, NCCL version (?P<nccl>[\d.]+))?", "unhandled system error",
                 "2021-05-10 10:56:59 ERROR    __main__   NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, "
                 "unhandled system error, NCCL version 2.7.8",
                 trigger=False),  # many causes; only the shm lines above name this one
        ),
    ),
    Rule(
        "dist.socket-ifname",
        "the network interface torch.distributed was told to use does not exist here",
        "GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (or the host name gloo resolves) names an interface or address "
        "this node does not have; gloo takes exact interface names, not NCCL's ^exclude lists.",
        "set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to an interface each node has and that is up "
        "(`ip -br addr`); `doctor fleet` checks them on every node",
        (
            sign(r"Unable to find address for: (?P<iface>\S+)", "Unable to find address for",
                 "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
                 "Unable to find address for: ib0",
                 "RuntimeError: Unable to find address for: eth0",
                 "  ifa != nullptr. Unable to find address for: ^lo",
                 "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] rp != nullptr. "
                 "Unable to find address for: dgx-1.ai"),
            sign(r"Bootstrap : no socket interface found", "no socket interface found",
                 basis="NCCL's bootstrap warning (src/bootstrap.cc) when NCCL_SOCKET_IFNAME matches no interface"),
        ),
    ),
    Rule(
        "gloo.connection-refused",
        "a rank could not connect to another (gloo: Connection refused)",
        "The peer's address is not reachable on that port: it advertised a loopback address (its host name "
        "resolves to 127.0.0.1), a firewall closes the ports, or the peer process already died.",
        "make each host name resolve to a routable address (/etc/hosts) or set GLOO_SOCKET_IFNAME to the routable "
        "interface on every node; open the ports between nodes; `doctor fleet` tests the path before the job",
        (
            sign(r"gloo/transport/tcp/pair\.cc:\d+\].*?(?:connect \[(?P<peer>[^\]]+)\]:\d+: )?Connection refused",
                 "Connection refused",
                 "RuntimeError: [/opt/conda/conda-bld/pytorch_1682343967769/work/third_party/gloo/gloo/transport/tcp/"
                 "pair.cc:799] connect [172.31.71.170]:13195: Connection refused",
                 "  what():  [enforce fail at /home/sayantan/gloo_GIT/gloo/gloo/transport/tcp/pair.cc:498] optval == 0. "
                 "111 vs 0. SO_ERROR: Connection refused"),
            sign(r"SO_ERROR: Connection refused(?:, remote=\[(?P<remote>[^\]]+)\])?", "SO_ERROR: Connection refused",
                 "  timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:<port>",
                 "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: Connection refused,"),
        ),
    ),
    Rule(
        "dist.address-in-use",
        "the rendezvous port is already in use",
        "Another job (or a leftover process of this one) listens on MASTER_PORT / the rendezvous port "
        "(29500 by default), so the store cannot start.",
        "pick a free port: torchrun --master-port 29611 (or --rdzv-endpoint HOST:0 on one node); "
        "find the owner with `ss -ltnp | grep 29500`",
        (
            sign(r"failed to bind to (?P<addr>\S+?):(?P<port>\d+) \(errno: 98 - Address already in use\)", "errno: 98",
                 "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
                 "failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind "
                 "to 0.0.0.0:29500 (errno: 98 - Address already in use).",
                 "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already "
                 "in use).",
                 "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
                 "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket "
                 "has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use)."),
            sign(r"port: (?P<port>\d+), useIpv6: \w+, code: -98, name: EADDRINUSE", "EADDRINUSE",
                 "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: 0, "
                 "code: -98, name: EADDRINUSE, message: address already in use."),
        ),
    ),
    Rule(
        "dist.no-libuv",
        "this torch has no libuv, which its rendezvous store asks for",
        "torch's Windows builds have no libuv, and since torch 2.4 a TCPStore uses the libuv server unless told "
        "otherwise. init_process_group (env://, tcp://) reads USE_LIBUV and the query, and in recent releases defaults "
        "to the old server on Windows; torchrun's static rendezvous, which accelerate launch and other launchers start "
        "on a machine with two GPUs, creates its store without asking either (up to torch 2.13 at least).",
        "one GPU needs no distributed start: run the script directly, or set the launcher to one process (accelerate "
        "config: one GPU; a tool that starts torchrun whenever it sees two GPUs, as LlamaFactory does: "
        "CUDA_VISIBLE_DEVICES=0). A script that calls init_process_group itself: set USE_LIBUV=0 for "
        "every rank (cmd: set USE_LIBUV=0; PowerShell: $env:USE_LIBUV = \"0\") or give it "
        "init_method=\"tcp://HOST:PORT?use_libuv=0\". Several GPUs under torchrun (static_tcp_rendezvous.py in the "
        "traceback) need Linux or WSL 2 until torch passes the setting on (pytorch/pytorch#178600)",
        (
            sign(r"use_libuv was requested but PyTorch was buil[dt] without libuv support", "use_libuv was requested",
                 "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
                 basis="torch 2.13's libtorch_cpu.so words it 'was built without libuv support, run with USE_LIBUV=0 "
                       "to disable it.'"),
        ),
    ),
    Rule(
        "dist.store-timeout",
        "a rank waited for the rendezvous store in vain",
        "Not every rank reached the store in time: a node never started or crashed early, cannot reach "
        "MASTER_ADDR:MASTER_PORT, or rank 0 was too slow (the store key it was to set never came).",
        "check that every node runs the same command and reaches MASTER_ADDR:MASTER_PORT; run `doctor fleet` with the "
        "same launcher: it names the ranks and hosts that do not join",
        (
            sign(r"Timeout waiting for key: (?P<key>\S+)", "Timeout waiting for key",
                 "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value "
                 "store by key '0', but store->get('0') got error: Timeout waiting for key: default_pg/0/0 after 1800000 ms"),
            sign(r"Timed out after (?P<seconds>\d+) seconds waiting for (?:clients|workers)\. (?P<joined>\d+)/(?P<total>\d+)",
                 "seconds waiting for",
                 "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.",
                 "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined."),
            sign(r"DistStoreError: wait timeout after (?P<after>\S+), keys: (?P<key>\S+)", "wait timeout after",
                 "DistStoreError: wait timeout after 100ms, keys: /the_key"),
            # A client that never reached the store's host and port. An issue title often ends
            # before the address, so the address is read where it is there.
            sign(r"The client socket has timed out after (?P<after>\d+m?s) while trying to connect to"
                 r"(?: \((?P<host>[^,()\s]+), (?P<port>[^()\s]+)\))?",
                 "The client socket has timed out after",
                 "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while "
                 "trying to connect to (172.18.21.4, 37907).",
                 "I faced a weird problem `torch.distributed.DistNetworkError: The client socket has timed out after "
                 "600000ms while trying to connect to (PRIVATE_IP, PORT)`.  Do you guys know this error? Below is my "
                 "training script.",
                 basis="torch 2.13's libtorch_cpu.so words it 'The client socket has timed out after {} while trying to "
                       "connect to ({}, {}).'; torch 2.0 printed the time in seconds ('after 1800s')"),
        ),
    ),
    Rule(
        "nccl.watchdog-timeout",
        "an NCCL collective never completed (watchdog timeout)",
        "One rank waited for a collective the others never joined: a rank hung or died, ranks called different "
        "collectives (or shapes), or the network between nodes stalled. The job hangs for the whole timeout first.",
        "find the rank that stopped first (its own log); run `doctor fleet` on the same nodes to test the network and "
        "collectives; TORCH_NCCL_DUMP_ON_TIMEOUT=1 / NCCL_DEBUG=INFO show which rank lagged",
        (
            sign(r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
                 r"[^)]*?Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ms>\d+) milliseconds",
                 "Watchdog caught collective operation timeout",
                 "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
                 "Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
                 "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, "
                 "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out."),
        ),
        # a rank that never joined shows up as a store timeout elsewhere: the watchdog is the consequence
    ),
)
TABLE = TABLE + DISTRIBUTED

RULES: dict[str, Rule] = {rule.id: rule for rule in TABLE}
ORDER: dict[str, int] = {rule.id: i for i, rule in enumerate(TABLE)}


# ---------------------------------------------------------------------------------------------
# The CUDA stack around libtorch (issue 13): toolkit, host compiler, CUDA libraries, build tools.
# Appended as one block; advice in doctor/explain/cuda_advice.py; logs in tests/fixtures/logs
# (index.json entries with "block": "cuda-stack (issue 13)").
# ---------------------------------------------------------------------------------------------

def _nvcc_banner() -> Sign:
    """`nvcc --version` in a log: context for a finding about that nvcc (its release), never one
    itself. A sign of its own for each rule: the engine ranks and attributes signs one rule each."""
    return sign(r"Cuda compilation tools, release (?P<nvcc>\d+\.\d+)", "Cuda compilation tools, release",
                "Cuda compilation tools, release 11.5, V11.5.119", trigger=False)

CUDA_STACK_RULES: tuple[Rule, ...] = (
    Rule(
        "cuda.host-compiler-unsupported",
        "the host compiler is newer than this nvcc accepts",
        "nvcc refuses host compilers newer than its release supports (crt/host_config.h).",
        "install a supported gcc/clang and export CUDAHOSTCXX / NVCC_CCBIN, or use a newer CUDA",
        (
            sign(r"unsupported (?P<kind>GNU|clang) version! (?:gcc|clang) versions later than (?P<max>\d+(?:\.\d+)?) are not supported",
                 "unsupported GNU version!",
                 "/usr/include/crt/host_config.h:132:2: error: #error -- unsupported GNU version! gcc versions later than 12 "
                 "are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version "
                 "check; however, using an unsupported host compiler may cause compilation failure or incorrect run time "
                 "execution. Use at your own risk.",
                 "/opt/cuda/include/host_config.h:119:2: error: #error -- unsupported GNU version! gcc versions later than 5 are not supported!"),
            sign(r"unsupported (?P<kind>clang) version! clang version must be less than (?P<max>\d+)", "unsupported clang version!",
                 basis="nvcc's crt/host_config.h for Clang: '#error -- unsupported clang version! clang version must be "
                       "less than 19 and greater than 3.2 . The nvcc flag '-allow-unsupported-compiler' ...'"),
            sign(r"unsupported GNU version! gcc (?P<max>[\d.]+) and up are not supported", "and up are not supported",
                 basis="CUDA ≤ 8 host_config.h: '#error -- unsupported GNU version! gcc 4.9 and up are not supported!'"),
            # nvcc's front end rewrites the host compiler's own C++ library headers; one it was not made for
            # comes back broken (nvcc 11.5, Ubuntu 22.04's, with GCC 11's <functional>; CUDA 8 with GCC 6's <tuple>).
            sign(r"/c\+\+/(?P<headers>\d+)/[\w/.]+:\d+:\d+: error: parameter packs not expanded with",
                 "error: parameter packs not expanded with",
                 "/usr/include/c++/11/bits/std_function.h:435:145: error: parameter packs not expanded with ‘...’:"),
            _nvcc_banner(),
        ),
    ),
    Rule(
        "cuda.arch-list-invalid",
        "this nvcc cannot build for the GPU architecture asked for",
        "Each CUDA release's nvcc compiles for a range of GPU architectures: a new GPU needs a newer toolkit, and newer "
        "toolkits drop old GPUs. torch.utils.cpp_extension asks for the arches in TORCH_CUDA_ARCH_LIST, or, when it is "
        "unset, for the GPUs it sees; CMake for CMAKE_CUDA_ARCHITECTURES or -gencode flags.",
        fixes.nvcc_for_arch("that architecture"),
        (
            sign(r"Unsupported gpu architecture '(?P<arch>compute_(?P<code>\d{2,3}[af]?))", "Unsupported gpu architecture",
                 "nvcc fatal: Unsupported gpu architecture 'compute_86' ninja: build stopped: subcommand failed",
                 "nvcc fatal   : Unsupported gpu architecture 'compute_61"),
            sign(r"Value '(?P<arch>(?:sm|compute)_(?P<code>\d{2,3}[af]?))' is not defined for option 'gpu-architecture'",
                 "is not defined for option 'gpu-architecture'",
                 "nvcc fatal   : Value 'sm_86' is not defined for option 'gpu-architecture'"),
            # ptxas's own words: Triton (torch.compile) runs the ptxas it bundles, older than a new GPU
            sign(r"ptxas fatal\s*: Value '(?P<arch>sm_(?P<code>\d{2,3}[af]?))' is not defined for option 'gpu-name'",
                 "is not defined for option 'gpu-name'",
                 "    ptxas fatal   : Value 'sm_30' is not defined for option 'gpu-name'"),
            sign(r"(?P<triton>triton/backends/nvidia/bin/ptxas)\b", "triton/backends/nvidia/bin/ptxas",
                 basis="Triton's PTXASError ends with 'Repro command: <its bundled …/site-packages/triton/backends/"
                       "nvidia/bin/ptxas> … --gpu-name=sm_121a …'", trigger=False),
            _nvcc_banner(),
            sign(r"/cuda-(?P<nvcc>\d+\.\d+)/bin/nvcc\b", "/bin/nvcc",
                 "nvcc fatal   : Unsupported gpu architecture 'compute_86' error: command '/usr/local/cuda-11.0/bin/nvcc' "
                 "failed with exit code 1", trigger=False),
        ),
    ),
    Rule(
        "cuda.toolkit-mismatch",
        "the CUDA toolkit (nvcc) differs from the CUDA torch was built with",
        "PyTorch's extension builder compares `nvcc --version` with torch.version.cuda: a different major is an error, "
        "a different minor a warning.",
        "point CUDA_HOME at a toolkit of torch's CUDA release, or install the torch build for the toolkit's release",
        (
            sign(r"The detected CUDA version \((?P<nvcc>\d+\.\d+)\) mismatches the version that was used to compile",
                 "The detected CUDA version",
                 "The detected CUDA version (12.4) mismatches the version that was used to compile",
                 "      The detected CUDA version (11.8) mismatches the version that was used to compile"),
            sign(r"The detected CUDA version \((?P<nvcc>\d+\.\d+)\) has a minor version mismatch with the version that was "
                 r"used to compile PyTorch \((?P<torch>\d+\.\d+)\)", "has a minor version mismatch",
                 basis="torch/utils/cpp_extension.py CUDA_MISMATCH_WARN"),
            sign(r"^\s*PyTorch \((?P<torch>\d+\.\d+)\)\. Please make sure to use the same CUDA versions", "Please make sure to use the same CUDA",
                 "PyTorch (11.8). Please make sure to use the same CUDA versions.", trigger=False),
        ),
    ),
    Rule(
        "cuda.toolkit-not-found",
        "no CUDA toolkit found (CUDA_HOME)",
        "Building CUDA code needs the CUDA toolkit (nvcc, headers); torch looks in $CUDA_HOME, $CUDA_PATH, the nvcc on "
        "PATH, then /usr/local/cuda.",
        "install the CUDA toolkit of torch's CUDA release and export CUDA_HOME=/usr/local/cuda-<version>",
        (
            sign(r"CUDA_HOME environment variable is not set", "CUDA_HOME environment variable is not set",
                 "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root."),
            sign(r"CUDA was not found on the system, please set the CUDA_HOME or the CUDA_PATH", "CUDA was not found on the system",
                 basis="torch/utils/cpp_extension.py CUDA_NOT_FOUND_MESSAGE"),
            # torch's CUDA headers (ATen/cuda/CUDAContext.h, c10/cuda/CUDAStream.h) include the toolkit's own:
            # a build without the toolkit's include folder (none installed, or CUDA_HOME not found, so the
            # extension was built as a CPU one) stops there
            sign(r"fatal error: '?(?P<header>cuda(?:_runtime(?:_api)?)?\.h)'?(?:: " + _NO_SUCH + r"| file not found)",
                 ("fatal error: cuda_runtime_api.h", "fatal error: cuda_runtime.h", "fatal error: cuda.h",
                  "fatal error: 'cuda_runtime_api.h'", "fatal error: 'cuda_runtime.h'", "fatal error: 'cuda.h'"),
                 "/home/me/anaconda3/envs/deep3d_pytorch/lib/python3.6/site-packages/torch/include/ATen/cuda/CUDAContext.h:5:10: "
                 "fatal error: cuda_runtime_api.h: No such file or directory"),
            sign(r"nvcc not found at '(?P<nvcc>[^']+)'", "nvcc not found at",
                 basis="torch/utils/cpp_extension.py _check_cuda_version: \"nvcc not found at '{nvcc}'. Ensure CUDA path "
                       "'{CUDA_HOME}' is correct.\""),
        ),
    ),
    Rule(
        "cuda.library-too-old",
        "a CUDA library older than the build needs was loaded",
        "The loader picked a CUDA library (NCCL, nvJitLink, cuDNN …) older than the one torch was linked against: an older "
        "pip nvidia-* package, or a system/toolkit copy earlier on LD_LIBRARY_PATH.",
        "remove the older copy from LD_LIBRARY_PATH, or pip install the nvidia-* version torch pins",
        (
            sign(r"undefined symbol: (?P<symbol>nccl\w+)", "undefined symbol: nccl",
                 "torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
                 "ImportError: /root/.local/conda/envs/yolov10/lib/python3.9/site-packages/torch/lib/libtorch_cuda.so: "
                 "undefined symbol: ncclCommRegister"),
            sign(r"(?P<consumer>\blib\w++\.so[.\d]*+): undefined symbol: (?P<symbol>__nvJitLink[A-Za-z]*+_(?P<major>\d+)_(?P<minor>\d+))",
                 "undefined symbol: __nvJitLink",
                 "ImportError: /home/dp/anaconda3/envs/ComfyUI/lib/python3.11/site-packages/torch/lib/../../nvidia/cusparse/"
                 "lib/libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12"),
            sign(r"cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against (?P<compiled>\([\d, ]+\)|\d+) but "
                 r"(?:found runtime version|linked against) (?P<runtime>\([\d, ]+\)|\d+)", "PyTorch was compiled",
                 "RuntimeError: cuDNN version incompatibility: PyTorch was compiled against (8, 3, 2) but linked against (8, 0, 3)",
                 "cuDNN version incompatibility: PyTorch was compiled  against (8, 5, 0) but found runtime version (8, 3, 3). "
                 "PyTorch already comes bundled with cuDNN. One option to resolving this error is to ensure PyTorch can find "
                 "the bundled cuDNN."),
            sign(r"libnvJitLink\.so\.\d+ => (?P<path>\S+)", "libnvJitLink.so",
                 "\tlibnvJitLink.so.12 => /usr/local/cuda-12.1/lib64/libnvJitLink.so.12 (0x000070ddad800000)", trigger=False),
        ),
    ),
    Rule(
        "cmake.nvtoolsext-missing",
        "CMake cannot find NVIDIA's nvToolsExt (NVTX v2)",
        "libtorch ≤ 2.4's Caffe2 CMake config requires libnvToolsExt, which CUDA 12 toolkits no longer ship (NVTX 3 is "
        "header-only).",
        "use libtorch ≥ 2.5 (it uses header-only NVTX 3), or install the nvtx package (pip install nvidia-nvtx-cu12) and "
        "pass -DCUDA_nvToolsExt_LIBRARY=<its lib/libnvToolsExt.so.1>",
        (
            sign(r"Failed to find nvToolsExt", "Failed to find nvToolsExt", "  Failed to find nvToolsExt"),
            sign(r"CUDA::nvToolsExt", "CUDA::nvToolsExt",
                 basis="CMake: 'The link interface of target \"torch::nvtoolsext\" contains: CUDA::nvToolsExt but the "
                       "target was not found.'"),
        ),
    ),
    Rule(
        "cmake.torch-library-missing",
        "CMake found TorchConfig.cmake but not libtorch's library",
        "find_package(Torch) found the config files, but the library next to them (lib/libtorch.so, torch.lib) is missing: "
        "an incomplete or mismatched libtorch, or CMAKE_PREFIX_PATH pointing at headers-only trees.",
        "point CMAKE_PREFIX_PATH at a complete libtorch (its lib/ holds libtorch.so), e.g. doctor fetch-libtorch",
        (
            sign(r"Could NOT find Torch \(missing: (?P<missing>TORCH_LIBRARY[^)]*)\)", "Could NOT find Torch",
                 "  Could NOT find Torch (missing: TORCH_LIBRARY)"),
        ),
    ),
    Rule(
        "cmake.torch-found-twice",
        "find_package(Torch) runs more than once in one CMake project",
        "TorchConfig.cmake defines caffe2::mkl (and, through MKL's own config, MKL::MKL) each time it runs; a second "
        "find_package(Torch) in a subdirectory, or in a dependency added with add_subdirectory(), meets the targets the "
        "first one made and CMake refuses to create or change them.",
        "call find_package(Torch REQUIRED) once, in the top-level CMakeLists.txt before add_subdirectory(), and let the "
        "subdirectories use its targets; where a dependency calls it too, guard that call: "
        "if(NOT TARGET torch) find_package(Torch REQUIRED) endif()",
        (
            sign(r"Cannot specify (?:link libraries|include directories) for (?:imported )?target \"(?P<target>caffe2::\w+)\"",
                 ('Cannot specify link libraries for target "caffe2::', 'Cannot specify include directories for imported target "caffe2::'),
                 '  Cannot specify link libraries for target "caffe2::mkl" which is not built',
                 basis="CMake's target_include_directories() on an imported target of another directory: 'Cannot specify "
                       "include directories for imported target \"caffe2::mkl\".'"),
            sign(r"add_library cannot create imported target \"(?P<target>caffe2::\w+|MKL::MKL)\" because another",
                 "add_library cannot create imported target",
                 '  add_library cannot create imported target "MKL::MKL" because another target with the same name already exists.'),
        ),
    ),
    Rule(
        "openmp.duplicate-runtime",
        "two OpenMP runtimes in one process",
        "Two copies of Intel's OpenMP runtime (libiomp5) were loaded — typically conda's MKL and the one torch ships.",
        "keep one OpenMP runtime: conda install nomkl (or remove the duplicate libiomp5 from the environment); "
        "KMP_DUPLICATE_LIB_OK=TRUE only hides it",
        (
            sign(r"OMP: Error #15: Initializing (?P<lib>\S+), but found (?P<other>\S+) already initialized", "OMP: Error #15",
                 "OMP: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized."),
        ),
    ),
    Rule(
        "build.ninja-missing",
        "ninja is not installed (torch C++ extensions need it)",
        "torch.utils.cpp_extension builds JIT extensions with ninja; it checks `ninja --version` on PATH.",
        "pip install ninja (in the environment that runs the build), then retry",
        (
            sign(r"Ninja is required to load C\+\+ extensions", "Ninja is required",
                 "RuntimeError: Ninja is required to load C++ extensions"),
        ),
    ),
)


# The same lines for two causes: the frame above them shows which, and doctor/explain/disambiguate.py
# decides (an installed torch lives in a site-packages or dist-packages folder). The lines are read
# once, for the first id; the second is only ever chosen from there.
PYTHON_RULES: tuple[Rule, ...] = (
    Rule(
        "python.torch-shadowed",
        "`import torch` took a torch/ that is not an installed torch",
        "Python imports the first torch/ on sys.path. The current folder (for python -c, -m, the REPL and a script "
        "started there) and PYTHONPATH come before site-packages: a PyTorch source checkout or a copied torch/ there "
        "has no compiled extension for this Python, only the torch/_C/ folder of type stubs.",
        "start Python from another folder (a PyTorch checkout's torch/ is sources to build from), or take that folder "
        "out of PYTHONPATH",
        (
            # torch >= 1.7 says that the torch/_C it took is a folder (of .pyi stubs) in these words; older torch
            # raised "No module named 'torch._C'"
            sign(r"No module named '?torch\._C'?(?![\w.])|Failed to load PyTorch C extensions",
                 ("No module named 'torch._C'", "No module named torch._C", "Failed to load PyTorch C extensions"),
                 "ModuleNotFoundError: No module named 'torch._C'",
                 "ImportError: Failed to load PyTorch C extensions:"),
            # "(unknown location)": Python's words for a namespace package, here the torch/_C/ folder
            sign(r"cannot import name '\w+' from 'torch\._C' \(unknown location\)", "from 'torch._C' (unknown location)",
                 "ImportError: cannot import name '_add_docstr' from 'torch._C' (unknown location)"),
            # the traceback's frame names the torch/ Python took
            sign(r'File "(?P<package>[^"]*?[\\/]torch)[\\/]__init__\.py", line \d+',
                 ('torch/__init__.py", line', 'torch\\__init__.py", line'),
                 '  File "/home/varas/shijy/install_torch/pytorch/torch/__init__.py", line 214, in <module>',
                 '  File "C:\\Users\\user\\PycharmProjects\\pythonProject19\\venv\\lib\\site-packages\\torch\\__init__.py", '
                 'line 209, in <module>',
                 trigger=False),
            sign(r"^(?P<package>\S*?[\\/]torch)[\\/]__init__\.py in <module>",  # IPython's traceback
                 ("torch/__init__.py in <module>", "torch\\__init__.py in <module>"),
                 "/opt/pytorch/torch/__init__.py in <module>()", trigger=False),
        ),
    ),
    Rule(
        "python.torch-extension-missing",
        "the installed torch has no `_C` extension this Python can load",
        "torch's compiled extension (torch/_C.<python tag>.so or .pyd) is missing from the installed torch, or was built "
        "for another Python (a wheel or environment copied from another Python version, an interrupted install), so "
        "Python took the torch/_C/ folder of type stubs instead.",
        "reinstall torch with the Python that runs the program: python -m pip install --force-reinstall --no-deps "
        "torch==<its version> (from the index it came from)",
        (),  # python.torch-shadowed's lines: disambiguate.py gives them this id when the frame shows an installed torch
    ),
    Rule(
        "python.torch-no-wheel",
        "pip found no torch for this Python and platform that meets the requirement",
        "pip lists, after 'from versions', the torch releases that have a file for this interpreter (its Python "
        "version, 32 or 64 bits, OS and CPU); the requirement matched none of them. torch publishes 64-bit wheels only, "
        "each release for a span of Python versions and platforms; builds with a local tag (+cu121, +cpu) are on "
        "PyTorch's own index, not on PyPI; PyPI's 0.1.2 files are old placeholders, no usable torch.",
        "ask for a release from pip's list, or use a 64-bit Python that the wanted release supports (python -c \"import "
        "sys, struct; print(sys.version, struct.calcsize('P') * 8)\"); for a +cuXXX or +cpu build add PyTorch's index: "
        "pip install torch==<version> --index-url https://download.pytorch.org/whl/<cuXXX or cpu>",
        (
            sign(r"Could not find a version that satisfies the requirement (?P<spec>torch(?![\w-])[^\s(]{0,200})"
                 r"(?: \([^)]{0,200}\))? \(from versions: (?P<versions>[^)]{0,4000})\)",
                 "satisfies the requirement torch",
                 "ERROR: Could not find a version that satisfies the requirement torch==2.4.1 (from versions: 2.2.0, "
                 "2.2.1, 2.2.2)",
                 "ERROR: Could not find a version that satisfies the requirement torch==1.9.1+cu111 (from versions: "
                 "0.1.2, 0.1.2.post1, 0.1.2.post2)"),
            sign(r"No matching distribution found for (?P<spec>torch(?![\w-])[^\s(]{0,200})",
                 "No matching distribution found for torch",
                 "ERROR: No matching distribution found for torch"),
        ),
    ),
    Rule(
        "python.torch-missing",
        "the Python that ran this has no torch",
        "Python found no torch package: torch is not installed for the interpreter that ran (another venv or conda "
        "environment, `python` against `python3`, a Jupyter kernel of another environment), or pip built a package in "
        "an isolated environment, which holds the package's declared build requirements only, not the torch you "
        "installed.",
        "install torch for the interpreter that runs it (python -m pip install torch, with that python); for a package "
        "whose setup.py imports torch, install torch first and build it with pip install --no-build-isolation",
        (
            sign(r"No module named '?torch'?(?![\w.])", ("No module named 'torch'", "No module named torch"),
                 "ModuleNotFoundError: No module named 'torch'", "ImportError: No module named torch"),
            # an isolated build (pip's, uv's): the error comes from the build backend run in a temporary environment
            sign(r"(?P<isolated>pip-build-env-|get_requires_for_build_(?:wheel|editable)|prepare_metadata_for_build_"
                 r"(?:wheel|editable)|Getting requirements to build (?:wheel|editable))",
                 ("pip-build-env-", "get_requires_for_build_", "prepare_metadata_for_build_", "Getting requirements to build"),
                 "  Getting requirements to build wheel ... error", trigger=False),
        ),
    ),
)

TABLE = TABLE + CUDA_STACK_RULES + PYTHON_RULES
RULES = {rule.id: rule for rule in TABLE}
ORDER = {rule.id: i for i, rule in enumerate(TABLE)}


# ---------------------------------------------------------------------------------------------
# Issue 17: the same causes in the words of other tools and of logs as people paste them.
# Written against the `dev` part of tests/fixtures/logs (index.json `split`); the examples are
# raw lines of those logs, matched as the engine matches them: after normalise.clean_line.
# ---------------------------------------------------------------------------------------------

_HEADER_CUT = r"(?<![\w./\\+-])" + HEADER + r"['\"]?\s*:\s*No such fi"  # a paste cut off mid-message
_TORCH_NS = r"'(?P<ns>torch|at|c10)'"

WORDINGS: dict[str, tuple[Sign, ...]] = {
    "arch.mismatch": (
        sign(_TORCHY + r".*?(?<!\S)(?P<file>[^\s:]++): file not recognized: [Ff]ile format not recognized",
             "file format not recognized",
             basis="GNU ld (bfd): '<file>: file not recognized: file format not recognized' (issue 17's wording)"),
        sign(_TORCHY + r".*?(?<!\S)(?P<file>\S++) is incompatible with (?P<required>\w++)", " is incompatible with ",
             basis="lld (ELF/InputFiles.cpp): 'ld.lld: error: <file> is incompatible with <emulation>'"),
        sign(_TORCHY + r".*?(?<!\S)(?P<file>[^\s:]++): incompatible target", "incompatible target",
             basis="GNU gold: 'error: <file>: incompatible target'"),
    ),
    "cxx.std-too-old": (
        sign(r"#error This file requires compiler and library support for the (?:forthcoming )?ISO C\+\+ (?P<std>\d{4})",
             "requires compiler and library support",
             basis="libstdc++'s bits/c++0x_warning.h: '#error This file requires compiler and library support for the "
                   "ISO C++ 2011 standard' (issue 17's wording)"),
        sign(r"The -std=c\+\+(?P<std>\d\d) flag is not supported with the configured host compiler",
             "flag is not supported with the configured host compiler",
             "nvcc warning : The -std=c++14 flag is not supported with the configured host compiler. Flag will be ignored."),
        sign(r"Value 'c\+\+(?P<std>\d\d)' is not defined for option 'std'", "is not defined for option 'std'",
             basis="nvcc < 11 given -std=c++17: \"nvcc fatal   : Value 'c++17' is not defined for option 'std'\""),
    ),
    "version.mismatch": (
        # tch-rs / ocaml-torch compile a generated C++ API against the libtorch they find: any
        # compile error inside it means the crate and the libtorch are different releases.
        sign(r"(?P<file>torch_api_generated\.cpp(?:\.h)?)[(:]\d+.*?\berror\b", "torch_api_generated.cpp",
             "  cargo:warning=libtch/torch_api_generated.cpp.h:1599:29: error: ‘_mps_max_pool2d’ is not a member of ‘torch’",
             "C:\\Users\\vidal\\.cargo\\registry\\src\\github.com-1ecc6299db9ec823\\torch-sys-0.1.6\\libtch\\"
             "torch_api_generated.cpp.h(2392): error C2039: 'cudnn_convolution_transpose_backward_bias': is not a member "
             "of 'torch'"),
        sign(r"'(?P<member>\w+)' is not a member of " + _TORCH_NS, ("is not a member of 'torch'", "is not a member of 'at'",
                                                                   "is not a member of 'c10'"),
             "/root/ml/pytorch-cpp/tutorials/intermediate/convolutional_neural_network/src/main.cpp:106:12: error: "
             "'InferenceMode' is not a member of 'torch'"),
        sign(r"no member named '(?P<member>\w+)' in namespace " + _TORCH_NS,
             ("in namespace 'torch'", "in namespace 'at'", "in namespace 'c10'"),
             "  cargo:warning=libtch/torch_api_generated.cpp.h:938:29: error: no member named '_index_put_impl_functional' "
             "in namespace 'torch'"),
    ),
    "link.library-missing": (
        sign(r"(?<![^\s/])lib(?P<lib>(?:torch|c10|caffe2|shm)(?:_\w++)?)\.(?:so|dylib)[^\s:]*+: error adding symbols: "
             r"DSO missing from command line", "DSO missing from command line",
             "/usr/bin/ld: //storage/brno6/home/tslaninakova/playground/RSMI/libtorch-abi/lib/libtorch_cpu.so: error "
             "adding symbols: DSO missing from command line"),
        # GNU ld: a library libtorch needs is not on the link path; the undefined c10:: symbols
        # that follow are its consequence, not an ABI mismatch (abi.mismatch folds into this).
        sign(r"(?<![\w.])(?P<lib>lib(?:torch|c10|caffe2|shm)\w*+\.so[\d.]*+), needed by (?P<by>[^\s,]++), not found", ", needed by ",
             basis="GNU ld (ldlang.c): 'warning: libc10.so, needed by libtorch_cpu.so, not found (try using -rpath "
                   "or -rpath-link)'; tests/explain/test_generalisation.py produces it with g++"),
    ),
    "headers.missing": (
        sign(_HEADER_CUT, "No such fi", "report error: “torch/script.h”: No such file or dire"),
    ),
    "nccl.system-error": (
        sign(r"ncclSystemError: System call \((?:e\.g\. )?socket, malloc", "ncclSystemError: System call",
             "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. "),
    ),
    "nccl.watchdog-timeout": (
        sign(r"Watchdog caught collective operati", "Watchdog caught collective",
             "[1763]   1%|▏         | 24/1752 [01:08<1:22:56,  2.88s/it][rank5]:[E602 11:17:52.185053341 "
             "ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operati"),
    ),
    "openmp.duplicate-runtime": (
        sign(r"Error #15: Initializing (?P<lib>\S+), but found (?P<other>\S+) already initialized",
             "Error #15: Initializing",
             "P: Error #15: Initializing libiomp5md.dll, but found libiomp5md.dll already initialized."),
    ),
    "build.ninja-missing": (
        sign(r"No such file or directory: '(?P<tool>ninja)'", "No such file or directory: 'ninja'",
             "FileNotFoundError: [Errno 2] No such file or directory: 'ninja': 'ninja'"),
    ),
    "cmake.nvtoolsext-missing": (
        sign(r"(?P<path>\S*NVIDIA Corporation[/\\]NvToolsExt\S*)",
             ("NVIDIA Corporation/NvToolsExt", "NVIDIA Corporation\\NvToolsExt"),
             "    \"C:/Program Files/NVIDIA Corporation/NvToolsExt/include\""),
    ),
    "cmake.torch-library-missing": (
        sign(r"(?<!\w)(?P<lib>(?:torch|c10|TORCH_LIBRARY|C10_LIBRARY)\w*+)-NOTFOUND", "-NOTFOUND",
             "LINK : fatal error LNK1104: cannot open file 'torch-NOTFOUND.obj' [C:\\Users\\t-ziw\\source\\repos\\"
             "cmf_toolkit\\libcmftk\\bui"),
    ),
    "link.as-needed": (
        sign(r"[Cc]annot (?:query|access) [\w ()]+? without ATen_cuda library", "without ATen_cuda library",
             basis="ATen's CUDAHooksInterface.h: 'Cannot query cuDNN version without ATen_cuda library.'"),
    ),
}


def _with_wordings(table: tuple[Rule, ...]) -> tuple[Rule, ...]:
    import dataclasses

    return tuple(dataclasses.replace(r, signs=r.signs + WORDINGS[r.id]) if r.id in WORDINGS else r for r in table)


TABLE = _with_wordings(TABLE)

# macOS and Windows (issue 14). Appended as one block; advice in doctor/explain/platform_advice.py
# (fixes in the log's own platform: Windows paths and set / $env: for a Windows log); logs in
# tests/fixtures/logs (windows.*--*.log). dyld's "Library not loaded" / "image not found" and
# "incompatible architecture" stay with loader.library-not-found and arch.mismatch above.

PLATFORM_RULES = (
    Rule(
        "windows.crt-mismatch",
        "objects built against different C++ runtimes (Debug/Release, /MD or /MT) are linked together",
        "MSVC records the runtime each object was compiled for (/MD, /MDd, /MT, /MTd and the matching "
        "_ITERATOR_DEBUG_LEVEL); link.exe refuses to mix them. libtorch's zips are /MD Release, or /MDd for the debug zip.",
        "build Release (cmake --build . --config Release) against the Release libtorch zip, or use the debug zip "
        "(libtorch-win-shared-with-deps-debug-…) for a Debug build; compile every library with /MD (CMake: "
        "CMAKE_MSVC_RUNTIME_LIBRARY=MultiThreadedDLL)",
        (
            sign(r"LNK2038: mismatch detected for '(?P<what>RuntimeLibrary|_ITERATOR_DEBUG_LEVEL)': value '(?P<found>\w+)'"
                 r"(?: doesn't match value '(?P<required>\w+)')?", "LNK2038",
                 "  = note: libtorch_sys-6c1049f81ce711d6.rlib(torch_api.o) : error LNK2038: mismatch detected for "
                 "'RuntimeLibrary': value 'MD_DynamicRelease' doesn't match value 'MT_StaticRelease' in "
                 "libesaxx_rs-325b40a662eef64d.rlib(esaxx.o)",
                 "20:33:22 libcpmt.lib(locale.obj) : error LNK2038: mismatch detected for 'RuntimeLibrary': value "
                 "'MT_StaticRelease' doesn't match value 'MD_DynamicRelease' in Backtrace.cpp.obj",
                 "  libprotobuf.lib(extension_set.obj) : error LNK2038: mismatch detected for 'RuntimeLibrary': value "
                 "'MT_StaticRelease'"),
        ),
    ),
    Rule(
        "windows.vc-runtime-missing",
        "the Microsoft Visual C++ runtime is not installed",
        "libtorch's DLLs (and torch's) import VCRUNTIME140.dll, VCRUNTIME140_1.dll and MSVCP140.dll from the VC++ "
        "2015-2022 redistributable, which neither the wheel nor the zips ship.",
        "install the Microsoft Visual C++ Redistributable (x64): https://aka.ms/vs/17/release/vc_redist.x64.exe",
        (
            sign(r"(?i)(?P<lib>(?:vcruntime140(?:_1)?|msvcp140(?:_\d)?)d?\.dll)(?: was)? not found",
                 ("dll was not found", "dll not found"),
                 '"the code execution cannot proceed because vcruntime140_1.dll was not found"',
                 '"VCRUNTIME140_1.dll not found. Reinstalling the program may fix this."'),
        ),
        explains=("loader.library-not-found",),
    ),
    Rule(
        "macos.min-version",
        "a library needs a newer macOS than the build targets",
        "Each Mach-O file records the oldest macOS it runs on; the program is linked for an older one, so on a macOS "
        "between the two dyld refuses the library ('built for macOS … which is newer than running OS').",
        "raise the deployment target to the library's minimum: CMake -DCMAKE_OSX_DEPLOYMENT_TARGET=<version> "
        "(or export MACOSX_DEPLOYMENT_TARGET=<version>), or use a library built for the older macOS",
        (
            sign(r"\((?P<file>[^()]+?(?:\([^()]*\))?)\) was built for newer (?:macOS|OSX) version \((?P<needs>[\d.]+)\) "
                 r"than being linked \((?P<target>[\d.]+)\)", "was built for newer",
                 "ld: warning: object file (/opt/homebrew/lib/libkineto.a(Config.cpp.o)) was built for newer macOS version "
                 "(12.0) than being linked (11.0)",
                 "2024-02-07T12:49:51.8306390Z ld: warning: dylib (/Users/runner/work/_temp/anaconda/envs/wheel_py38/lib/"
                 "libomp.dylib) was built for newer macOS version (11.1) than being linked (11.0)"),
            sign(r"built for macOS (?P<needs>[\d.]+) which is newer than running OS", "which is newer than running OS",
                 basis="dyld's refusal: 'Library not loaded: … (built for macOS 14.0 which is newer than running OS)'"),
        ),
        explains=("loader.library-not-found",),
    ),
)
TABLE = TABLE + PLATFORM_RULES
RULES = {rule.id: rule for rule in TABLE}
ORDER = {rule.id: i for i, rule in enumerate(TABLE)}
