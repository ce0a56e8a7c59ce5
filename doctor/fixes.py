"""The fix builders `check` (doctor/diagnose/*) and `explain` share: one wording per remedy,
every path quoted for the shell it is pasted into (doctor/quoting.py), every version or variant
fact taken from the catalog. Pure: text in, text out."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from doctor.catalog.platforms import loader_variable
from doctor.catalog.releases import ABI_DEFINE, PRE_CXX11_LAST, has_pre_cxx11
from doctor.catalog.toolkit import compilers_for as _compilers_for
from doctor.catalog.toolkit import nvcc_releases
from doctor.formats import clip
from doctor.quoting import rpath_problem, rpath_words, sh_paste, sh_prepend

SETENV = 'eval "$(doctor emit setenv)"'
# --emit sets up the shell for the tree just installed: `fetch && emit setenv` set it up for the
# active one again, the stale LIBTORCH (or Torch_DIR) the finding was about.
FETCH = 'eval "$(doctor fetch-libtorch --emit setenv)"'
ABI_FLAG = ABI_DEFINE
# Why a ~ in a variable stays a folder name: said by every finding and refusal about one.
TILDE_RULE = "only a shell expands ~, and only unquoted at the start of a word"


def fetch(version: str | None = None, variant: str | None = None, *, from_wheel: bool = False) -> str:
    """The `doctor fetch-libtorch` command line for this variant of this version."""
    words = ["doctor fetch-libtorch"]
    if version:
        words.append(f"--version {sh_paste(version)}")
    if variant:
        words.append(f"--variant {sh_paste(variant)}")
    if from_wheel:
        words.append("--from-wheel")
    return " ".join(words)


TORCH_INDEX = "https://download.pytorch.org/whl"


def pip_torch(version: str | None = None, variant: str | None = None, *, force: bool = False) -> str:
    """The pip command for the torch wheel of this variant of this version, from PyTorch's index."""
    words = ["pip install"] + (["--force-reinstall"] if force else [])
    words.append(f"torch=={sh_paste(version)}" if version else "torch")
    if variant:
        words.append(f"--index-url {TORCH_INDEX}/{sh_paste(variant)}")
    return " ".join(words)


def fetch_and_setenv(version: str | None = None, variant: str | None = None) -> str:
    """Install this libtorch and set up the shell for it (see FETCH)."""
    return f'eval "$({fetch(version, variant)} --emit setenv)"'


def prepend_path(variable: str, dirs: Sequence[str], system: str = "Linux") -> str:
    """Put `dirs` first on a path-list variable, as a line to paste into the shell of `system`."""
    if system == "Windows":
        return f'set "{variable}={";".join(dirs)};%{variable}%"'
    return sh_prepend(variable, list(dirs))


def loader_path(lib_dir: str, system: str = "Linux") -> str:
    """Let the dynamic loader find the libraries in `lib_dir` (LD_LIBRARY_PATH, DYLD_LIBRARY_PATH, PATH)."""
    return prepend_path(loader_variable(system), [lib_dir], system)


def separate_library(lib: str, project: str, release: str | None = None, system: str = "Linux") -> str:
    """A library of one of PyTorch's domain projects (torchvision, torchaudio), which no libtorch has."""
    which = f" {release}.x (the release made for this torch)" if release else ""
    return (f"build and install {project}{which} from its source with CMake against the same libtorch, then add the "
            f"folder that holds {lib} to {loader_variable(system)} (or link with an rpath to it)")


def rpath_flag(lib_dir: str, system: str = "Linux") -> str:
    """The link flag that gives a program the rpath `lib_dir`, to paste (quoting.rpath_words: one
    word the compiler driver cannot split at a comma); for a path no rpath can hold, what to do."""
    problem = rpath_problem(lib_dir, system)
    if problem:
        return f"an rpath once {sh_paste(lib_dir)} is moved to a path without {problem[0]} ({problem[1]})"
    return " ".join(sh_paste(word) for word in rpath_words(lib_dir, system))


def run_time_path(lib_dir: str, system: str = "Linux", variable: str | None = None) -> str:
    """The loader path, or an rpath, or the emitted environment."""
    first = prepend_path(variable or loader_variable(system), [lib_dir], system)
    return f"{first}   (or: {SETENV}, or link with {rpath_flag(lib_dir)})"


def cxx_not_found() -> str:
    """$CXX names a compiler that is not there: make, CMake and cc-rs build with it all the same."""
    return "unset CXX   (or set it to an installed compiler: export CXX=g++)"


def readable_by_all(root: str) -> str:
    """Give every user read access to a tree (folders searchable too), without making files executable."""
    return f"sudo chmod -R a+rX {sh_paste(root)}   (or ask the tree's owner to)"


def link_dir(lib_dir: str, system: str = "Linux") -> str:
    """Let the linker find the libraries in `lib_dir` (-L, LIBRARY_PATH, cabal, setup.py)."""
    if system == "Windows":
        return f'{prepend_path("LIB", [lib_dir], "Windows")}   (or /LIBPATH:"{lib_dir}")'
    return (f"{sh_prepend('LIBRARY_PATH', [lib_dir])}\n(or {sh_paste('-L' + lib_dir)}; "
            f"cabal: {sh_paste('--extra-lib-dirs=' + lib_dir)}; setup.py: LDFLAGS={sh_paste('-L' + lib_dir)}; or {SETENV})")


def include_dirs(dirs: Sequence[str]) -> str:
    """Put libtorch's include dirs (both of them) on the compiler's search path."""
    cabal = " ".join(sh_paste(f"--extra-include-dirs={d}") for d in dirs)
    return (f"{sh_prepend('CPLUS_INCLUDE_PATH', list(dirs))}\n"
            f"(or {' '.join(sh_paste('-I' + d) for d in dirs)}; cabal: {cabal}; or {SETENV})")


def abi_define(abi: str) -> str:
    """"cxx11" → -D_GLIBCXX_USE_CXX11_ABI=1."""
    return f"-D_GLIBCXX_USE_CXX11_ABI={ABI_FLAG[abi]}"


def build_with_abi(abi: str) -> str:
    """Compile the program with libtorch's std::string ABI."""
    value = ABI_FLAG[abi]
    return (f"compile with {abi_define(abi)} (CMake: add ${{TORCH_CXX_FLAGS}} or link the Torch target; "
            f"tch-rs: LIBTORCH_CXX11_ABI={value})")


def other_abi_build(version: str | None, abi: str) -> str | None:
    """Fetch the build of the program's ABI instead, where the catalog says one was published."""
    if not version or not has_pre_cxx11(version):
        return None
    return f"or fetch the {abi} build of libtorch {version} (published up to {PRE_CXX11_LAST})"


def compilers_for(need: int) -> str:
    """"g++ ≥ 11 or clang++ ≥ 14" for C++20, from the catalog; "" for a standard it does not list."""
    pair = _compilers_for(need)
    return f"g++ ≥ {pair[0]} or clang++ ≥ {pair[1]}" if pair else ""


def cxx_standard(need: int) -> str:
    compilers = compilers_for(need)
    return (f"compile with -std=c++{need} (CMake: set(CMAKE_CXX_STANDARD {need}); MSVC: /std:c++{need}"
            + (f"; a compiler that supports it: {compilers}" if compilers else "") + ")")


def newer_compiler(need: int) -> str:
    compilers = compilers_for(need)
    return ("install a newer compiler" + (f" ({compilers} for C++{need})" if compilers else "")
            + f" and build with -std=c++{need}")


def nvcc_span(cc: str) -> str:
    """"CUDA 11.1 or newer", "CUDA 8.0 to 12.9": the releases whose nvcc builds for `cc`; "" when unknown."""
    span = nvcc_releases(cc)
    if span is None:
        return ""
    return f"CUDA {span[0]} or newer" if span[1] is None else f"CUDA {span[0]} to {span[1]}"


def nvcc_for_arch(cc: str, entry: str | None = None, *, instead: str | None = None) -> str:
    """An nvcc that cannot build for compute capability `cc` ("that architecture" where the log names
    none): another toolkit, or other targets. `entry`: the TORCH_CUDA_ARCH_LIST entry that asked for it; `instead`: with the variable unset
    (extensions build for the GPU itself), the newest target this nvcc builds below that GPU."""
    span = nvcc_span(cc)
    toolkit = f"a CUDA toolkit whose nvcc builds for {cc}" + (f" ({span})" if span else "")
    if instead:
        other = (f'or export TORCH_CUDA_ARCH_LIST="{instead}+PTX" (this nvcc builds {instead}; '
                 f"code for it runs on a {cc} GPU)")
    else:
        other = f"or drop {entry or cc} from TORCH_CUDA_ARCH_LIST (or from the -gencode / CMAKE_CUDA_ARCHITECTURES flags)"
    return f'use {toolkit}: export CUDA_HOME=/usr/local/cuda-<version> PATH="$CUDA_HOME/bin:$PATH"; {other}'


def link_no_as_needed() -> str:
    """Keep libtorch_cuda linked although no symbol of it is referenced directly."""
    return ("link with -Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed (CMake: target_link_libraries(app "
            "\"${TORCH_LIBRARIES}\")); check with: ldd <binary> | grep torch_cuda")


def driver_upgrade(floor: str | None = None) -> str:
    if floor:
        return f"upgrade the NVIDIA driver to ≥ {floor}"
    return "upgrade the NVIDIA driver (nvidia-smi shows the CUDA version it supports)"


def no_device() -> str:
    """No NVIDIA GPU can be used: the driver, the container, or a CPU-only machine."""
    return ("install/load the NVIDIA driver until nvidia-smi works; in Docker: docker run --gpus all "
            "(NVIDIA Container Toolkit); on a CPU-only machine use the CPU device")


def exec_mount(folder: str) -> str:
    """A libtorch tree on a noexec mount: move it, or remount."""
    return (f"move the tree to a file system mounted without noexec (`findmnt -T {sh_paste(folder)}` shows its mount "
            "and options), or remount that one with exec; then point LIBTORCH there")


def unmappable_library(folder: str | None, cause: str | None) -> str:
    """ld.so found a library but could not map it: a noexec mount, or an address-space limit.
    `cause` is "noexec", "limit", or None when the log does not say which."""
    where = sh_paste(folder) if folder else "<the library's folder>"
    noexec = (f"if `findmnt -no OPTIONS -T {where}` lists noexec, move the library to a file system mounted without "
              "it (for extensions built under /tmp: TMPDIR=<such a folder>), or remount that one with exec")
    limit = ("if `ulimit -v` prints a number, raise it (ulimit -v unlimited, or ask for a larger limit) or run where "
             "none applies (a compute node, not the login node): libtorch_cuda.so alone maps over a gigabyte")
    return {"noexec": noexec, "limit": limit}.get(cause or "") or f"{noexec}; {limit}"


def exec_tmpdir() -> str:
    """TMPDIR on a noexec mount: run the build probe from a folder where programs may run."""
    return 'mkdir -p ~/.cache/tmp && TMPDIR=~/.cache/tmp doctor check --build  (any folder on a mount without noexec)'


def drop_empty_entries(variable: str) -> str:
    """A :-list without its empty entries (and, for the scripts that made one, the idiom that never does)."""
    return (f'export {variable}="$(printf %s "${variable}" | tr -s : | sed \'s/^://; s/:$//\')"   '
            f'(and prepend with {variable}="/x${{{variable}:+:${variable}}}", which adds no empty entry)')


def absolute_entries(variable: str, absolute: dict[str, str]) -> str:
    """Relative :-list entries written as the folders they mean (from here; a literal ~ as the
    home folder), and the idiom for a script (which is run from the folder it means)."""
    shown = ", ".join(f"{sh_paste(clip(rel))} → {sh_paste(clip(path))}" for rel, path in list(absolute.items())[:3])
    tilde = any(rel == "~" or rel.startswith("~/") for rel in absolute)
    return (f"write them as absolute folders in {variable} ({shown}" + ("" if tilde else " from this folder") + "); "
            + ('a ~ stays literal in quotes: write "$HOME/…" instead' if tilde
               else 'a script setting it from its own folder can prefix "$PWD/"'))


def unshadow_torch(package: str, via: str | None) -> str:
    """Let `import torch` reach the installed torch again. `via`: how that torch/ got ahead of it
    ("current folder", "PYTHONPATH", "sys.path"), or None when only its place is known (a log)."""
    parent = sh_paste(str(PurePath(package).parent))
    if via == "current folder":
        return "start Python from another folder (a PyTorch checkout's torch/ is sources to build from), or rename ./torch"
    if via == "PYTHONPATH":
        return f"remove {parent} from PYTHONPATH (or `unset PYTHONPATH`)"
    if via is None:
        return (f"start Python from another folder than {parent} and take {parent} out of PYTHONPATH (a PyTorch "
                "checkout's torch/ is sources to build from); if that checkout is your editable install, build it for "
                "this Python: pip install --no-build-isolation -v -e .")
    return f"remove {sh_paste(package)}, or the .pth file that adds {parent} to sys.path"


def reinstall_torch(version: str | None = None, python: str = "python") -> str:
    """The installed torch lacks the compiled `_C` for the Python that imports it."""
    pinned = f"torch=={version}" if version else "torch==<its version>"
    return (f"reinstall torch with the Python that runs the program, which picks the build for it: "
            f"{sh_paste(python)} -m pip install --force-reinstall --no-deps {sh_paste(pinned)} (from the index it "
            "came from: a +cpu or +cuXYZ version needs that --index-url)")


def build_without_isolation() -> str:
    """A package whose setup.py imports torch, built by pip in an isolated environment."""
    return ("install torch first, then build the package against it: pip install --no-build-isolation <package> "
            "(its other build requirements too: pip install setuptools wheel ninja packaging; uv: the same flag, or "
            "no-build-isolation-package in [tool.uv])")


def install_torch_here() -> str:
    """`import torch` in an interpreter that has none."""
    return ("install torch for the interpreter that ran it: python -m pip install torch with that python "
            "(`which python` and a notebook's kernel may name another environment); "
            "`doctor check --python <that python>` shows what it sees")


def preload_without() -> str:
    """LD_PRELOAD holding what a libtorch program should not get."""
    return "unset LD_PRELOAD, or set it to the libraries you mean to preload, each an existing absolute path"


def glibc_system() -> str:
    """libtorch on a musl system: there is no build for it."""
    return ("use a glibc-based system or container image (Debian, Ubuntu, Fedora; for Python: python:3.x-slim, "
            "not -alpine), or build libtorch from source against musl")


def gpu_device_access() -> str:
    """This user may not open /dev/nvidia*: the group that owns them, or the container's policy."""
    return ("ls -l /dev/nvidia* shows the group that may open them (often video): sudo usermod -aG <group> $USER, "
            "then log in again; in a container: --group-add keep-groups (podman), or "
            "setsebool -P container_use_devices 1 where SELinux denies it")


def unhide_gpus() -> str:
    return "unset CUDA_VISIBLE_DEVICES (or list existing GPU indices, from 0)"


def newer_libstdcxx() -> str:
    return "install a newer libstdc++ (a newer gcc / libstdc++6 package, or conda's libstdcxx-ng)"


def conda_libstdcxx(lib: str) -> str:
    return (f"the conda environment's libstdc++ ({sh_paste(lib)}) is too old: conda install -c conda-forge "
            "'libstdcxx-ng>=13' (or put the system's newer libstdc++ first: "
            "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6)")


def nccl_release(code: str | int) -> str:
    """NCCL's integer version code as a release: 22703 → "2.27.3", 2708 → "2.7.8".

    NCCL_VERSION(X, Y, Z) in nccl.h is X*1000 + Y*100 + Z up to 2.8 and X*10000 + Y*100 + Z from 2.9."""
    n = int(code)
    major, rest = divmod(n, 10000 if n >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def same_versions_on_every_node(nccl: Sequence[str] = ()) -> str:
    """Every rank of a job on one torch build and so one NCCL: the wording `doctor explain` gives a
    log whose ranks disagree, for the nodes `doctor fleet` finds differing."""
    seen = f" (this log shows NCCL {' and '.join(nccl)})" if nccl else ""
    return ("install the same torch build on every node - each torch wheel carries its NCCL - and let no other libnccl "
            "take its place there (a system libnccl2, an nvidia-nccl-cu* of another version, LD_LIBRARY_PATH)" + seen
            + "; compare the nodes with python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())', "
            "or run `doctor fleet` with the job's launcher: it names the nodes whose torch or NCCL differs")


def store_reachable(host: str, port: str) -> str:
    """A rank that timed out connecting to the rendezvous store at host:port (a name or address
    the caller has checked: it is shown in a command)."""
    return (f"check from the node that failed that {host}:{port} answers while the job starts (nc -zv "
            f"{sh_paste(host)} {port}): it must be rank 0's MASTER_ADDR and MASTER_PORT, an address every node "
            "reaches, and rank 0 must be up and listening before the others give up; run `doctor fleet` with the "
            "same launcher: it names the ranks and hosts that do not join")


def first_error(command: str) -> str:
    """A command failed and no pattern knows why: its own first error is where to look."""
    return (f"read the first error in the output of {command} (above)\n"
            "(if it is a setup problem the doctor should know, please report it with this output)")
