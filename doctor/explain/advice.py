"""From what the log proved to what to do on this machine.

One function per diagnosis id turns the matched lines (and their named groups) plus the facts
of this machine — the active libtorch, the OS, glibc, the environment — into a concrete title,
explanation and fix: the exact -D flag, the directory to add, the variant to fetch. Without
facts each falls back to the generic text of the pattern table, never to a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath

from doctor.catalog.cuda import arch_list, covers, cuda_of_variant, floor_driver
from doctor.diagnose.common import version_key
from doctor.emit.variables import loader_variable
from doctor.explain.engine import Match
from doctor.model import Evidence
from doctor.quoting import sh_paste, sh_prepend
from doctor.probe.nvidia import parse_cuda_version

FETCH = 'doctor fetch-libtorch && eval "$(doctor emit setenv)"'
SETENV = 'eval "$(doctor emit setenv)"'


@dataclass
class MachineFacts:
    """What explain knows about this machine; every field may be missing."""

    install: object | None = None  # doctor.probe.libtorch.LibtorchInstall
    system: str = "Linux"
    machine: str = "x86_64"
    glibc: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    exists: Callable[[str], bool] | None = None  # host.exists, to look for a header in an include dir

    @classmethod
    def from_host(cls, host, install=None) -> MachineFacts:
        return cls(install, host.system, host.machine, host.glibc, dict(host.env), host.exists)

    @classmethod
    def detect(cls, host) -> MachineFacts:
        """Facts from the probes: the active libtorch as `doctor check` would pick it."""
        from doctor.probe.libtorch import detect_libtorch
        from doctor.probe.python_torch import detect_python_torch

        facts = detect_libtorch(host, detect_python_torch(host))
        return cls.from_host(host, facts.active_install)


@dataclass
class Advice:
    title: str
    detail: list[str]
    fix: str
    subject: str = ""
    evidence: list[Evidence] = field(default_factory=list)


def advise(match: Match, facts: MachineFacts | None) -> Advice:
    facts = facts or MachineFacts()
    rule = match.rule
    make = ADVISORS.get(rule.id)
    advice = make(match, facts) if make else Advice(rule.title, [rule.cause], rule.fix)
    install = _install(facts)
    if install is not None and rule.id != "cuda.no-device":
        advice.evidence.append(Evidence("derived", "active libtorch", f"{install.label} at {install.root}"))
    return advice


# -- helpers --


def _install(facts: MachineFacts):
    install = facts.install
    return install if install is not None and getattr(install, "exists", False) else None


def _where(install) -> str:
    return f"libtorch {install.label} at {install.root}"


def _platform(match: Match, facts: MachineFacts) -> str:
    """The OS the log came from: its own words first (dyld, .dll), this machine otherwise."""
    text = " ".join(h.line for h in match.hits)
    if "dyld" in text or ".dylib" in text or "Library not loaded" in text:
        return "Darwin"
    if ".dll" in text or "LNK1104" in text or "Could not find module" in text:
        return "Windows"
    if ".so" in text:
        return "Linux"
    return facts.system


def _prepend(var: str, value: str, system: str = "Linux") -> str:
    if system == "Windows":
        return f'set "{var}={value};%{var}%"'
    return sh_prepend(var, value.split(":"))


def _lib_file(stem: str, system: str) -> str:
    return {"Darwin": f"lib{stem}.dylib", "Windows": f"{stem}.dll"}.get(system, f"lib{stem}.so")


def _plural(items: list[str]) -> str:
    return ", ".join(items)


# -- one advisor per id --


def _arch(match: Match, facts: MachineFacts) -> Advice:
    found = match.first("found")
    required = match.first("required")
    files = match.values("file")
    system = _platform(match, facts)
    install = _install(facts)
    detail = [match.rule.cause]
    if found and required:
        detail.append(f"The library is built for {found}; the program being built or run is {required}.")
    if install is not None and install.elf_machine and install.elf_machine not in (facts.machine, None):
        detail.append(f"The active {_where(install)} is an {install.elf_machine} build; this machine is {facts.machine}.")
    target = required or facts.machine
    if system == "Darwin" or "arm64" in (required or ""):
        fix = ("fetch the Apple-silicon build: libtorch-macos-arm64-<version>.zip "
               "(doctor fetch-libtorch picks it on arm64 macOS), then " + SETENV)
    elif re.search(r"aarch64|arm64", target or "") or facts.machine in ("aarch64", "arm64"):
        fix = ("there is no aarch64 Linux libtorch zip: use a PyTorch wheel's libtorch "
               "(pip install torch; tch-rs: LIBTORCH_USE_PYTORCH=1; or doctor fetch-libtorch --from-wheel), then " + SETENV)
    else:
        fix = f"fetch the libtorch built for this machine ({facts.machine}): {FETCH}"
    title = f"libtorch is built for {found}, not {required}" if found and required else match.rule.title
    return Advice(title, detail, fix, subject=files[0] if files else (found or ""))


def _glibc(match: Match, facts: MachineFacts) -> Advice:
    needs = match.values("need")
    sources = match.values("from")
    by = match.values("by")
    detail = [match.rule.cause]
    glibc_needs = sorted((n for n in needs if n.startswith("GLIBC_")), key=version_key)
    cxx_needs = sorted((n for n in needs if not n.startswith("GLIBC_")), key=version_key)
    if by:
        detail.append(f"Needed by {by[0]}.")
    fixes = []
    if glibc_needs:
        newest = glibc_needs[-1]
        have = facts.glibc
        detail.append(f"It needs {newest}" + (f"; this system has glibc {have}." if have else "."))
        fixes.append(f"run on a distribution with glibc ≥ {newest.split('_', 1)[1]} (libtorch ≥ 2.7 is built on "
                     "manylinux_2_28: glibc 2.28), or use a libtorch ≤ 2.6")
    if cxx_needs:
        newest = cxx_needs[-1]
        lib = next((s for s in sources if "stdc++" in s), None)
        detail.append(f"It needs {newest} from libstdc++" + (f", and the one loaded is {lib}." if lib else "."))
        if lib and ("conda" in lib or "/envs/" in lib or "mamba" in lib):
            fixes.append(f"the conda environment's libstdc++ ({sh_paste(lib)}) is too old: conda install -c conda-forge "
                         "'libstdcxx-ng>=13' (or put the system's newer libstdc++ first: "
                         "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6)")
        else:
            fixes.append("install a newer libstdc++ (a newer gcc / libstdc++6 package, or conda's libstdcxx-ng)")
    title = f"this system is too old for the library: {_plural(needs)} not available" if needs else match.rule.title
    return Advice(title, detail, "\n".join(fixes) or match.rule.fix, subject=_plural(needs))


def _duplicate_rpath(match: Match, facts: MachineFacts) -> Advice:
    paths = match.values("path")
    path = paths[0] if paths else "<path>"
    detail = [match.rule.cause]
    fix = (f"drop one of the layers that adds -rpath {sh_paste(path)} (Hasktorch with executable-dynamic: Cabal already adds "
           f"it for extra-lib-dirs); to repair a built binary: install_name_tool -delete_rpath {sh_paste(path)} <binary> "
           "&& codesign -f -s - <binary>")
    return Advice(f"duplicate LC_RPATH '{path}'", detail, fix, subject=path)


def _cmake(match: Match, facts: MachineFacts) -> Advice:
    install = _install(facts)
    detail = [match.rule.cause]
    if install is not None:
        detail.append(f"The active {_where(install)} has its CMake package in {PurePath(install.root) / 'share/cmake/Torch'}.")
        fix = (f"cmake {sh_paste('-DCMAKE_PREFIX_PATH=' + str(install.root))} ..   "
               f"(or export Torch_DIR={sh_paste(str(PurePath(install.root) / 'share/cmake/Torch'))}; or {SETENV})")
    else:
        detail.append("No libtorch was found on this machine.")
        fix = f"{FETCH}   (it sets CMAKE_PREFIX_PATH and Torch_DIR)"
    return Advice("CMake cannot find libtorch (find_package(Torch) failed)", detail, fix, subject="TorchConfig.cmake")


def _cxx_std(match: Match, facts: MachineFacts) -> Advice:
    stds = [int(s) for s in match.values("std")]
    install = _install(facts)
    need = max(stds, default=17)
    detail = [match.rule.cause]
    if install is not None and install.cxx_standard:
        detail.append(f"The active {_where(install)} needs C++{install.cxx_standard} "
                      f"(from {install.cxx_standard_source or 'its version'}).")
        need = max(need, install.cxx_standard)
    fix = (f"compile with -std=c++{need} (CMake: set(CMAKE_CXX_STANDARD {need}); MSVC: /std:c++{need}; "
           "a compiler that supports it: gcc ≥ 9 / clang ≥ 10 for C++17, gcc ≥ 10 / clang ≥ 12 for C++20)")
    return Advice(f"libtorch needs C++{need}; the compiler ran an older standard", detail, fix, subject=f"c++{need}")


def _headers(match: Match, facts: MachineFacts) -> Advice:
    headers = [h.replace("\\", "/") for h in match.values("header")]
    install = _install(facts)
    detail = [match.rule.cause]
    if install is not None:
        dirs = [str(d) for d in install.include_dirs]
        located = []
        for header in headers:
            where = next((d for d in dirs if facts.exists and facts.exists(str(PurePath(d) / header))), None)
            if where:
                located.append(f"{header} is in {where}" + (" (the second include dir, the one most often missed)"
                                                            if where == dirs[-1] and len(dirs) > 1 else ""))
            else:
                located.append(f"{header} is not in the active {_where(install)}: the code expects another "
                               "libtorch version, or a header libtorch does not have")
        detail += located
        cabal = " ".join(sh_paste(f"--extra-include-dirs={d}") for d in dirs)
        fix = (f"{sh_prepend('CPLUS_INCLUDE_PATH', dirs)}\n"
               f"(or {' '.join(sh_paste('-I' + d) for d in dirs)}; cabal: {cabal}; or {SETENV})")
    else:
        detail.append("No libtorch was found on this machine.")
        fix = (f"{FETCH}\n(libtorch needs both <root>/include and <root>/include/torch/csrc/api/include on the "
               "include path)")
    return Advice(f"libtorch headers not found: {_plural(headers)}", detail, fix, subject=_plural(headers))


def _libs_of(match: Match) -> list[str]:
    libs = list(match.values("lib"))
    for text in match.values("libs"):
        libs += [x.strip() for x in text.split(",") if x.strip()]
    return list(dict.fromkeys(libs))


def _link(match: Match, facts: MachineFacts) -> Advice:
    libs = _libs_of(match)
    install = _install(facts)
    system = _platform(match, facts)
    detail = [match.rule.cause]
    text = " ".join(h.line for h in match.triggers)
    if "compiler_compat" in text:
        detail.append("The linker is conda's compiler_compat/ld, which does not search the system's default "
                      "paths: give the directory explicitly.")
    if install is not None:
        lib_dir = str(install.lib_dir)
        absent = [lib for lib in libs if facts.exists and not facts.exists(str(PurePath(lib_dir) / _lib_file(lib, system)))]
        present = [lib for lib in libs if lib not in absent]
        if present:
            detail.append(f"{_plural(_lib_file(l, system) for l in present)} {'is' if len(present) == 1 else 'are'} in {lib_dir}.")
        if absent:
            detail.append(f"{_plural(_lib_file(l, system) for l in absent)} {'is' if len(absent) == 1 else 'are'} not part of "
                          f"the active {_where(install)}"
                          + (": a CPU build has no CUDA libraries" if (install.variant == "cpu" and any("cuda" in a for a in absent)) else "")
                          + ".")
        if system == "Windows":
            fix = f'{_prepend("LIB", lib_dir, "Windows")}   (or /LIBPATH:"{lib_dir}")'
        else:
            fix = (f"{sh_prepend('LIBRARY_PATH', [lib_dir])}\n(or {sh_paste('-L' + lib_dir)}; "
                   f"cabal: {sh_paste('--extra-lib-dirs=' + lib_dir)}; "
                   f"setup.py: LDFLAGS={sh_paste('-L' + lib_dir)}; or {SETENV})")
        if absent and any("cuda" in a for a in absent) and install.variant == "cpu":
            fix += "\nfor " + _plural(absent) + ": fetch a CUDA variant (doctor fetch-libtorch --variant cu126) or drop them"
    else:
        detail.append("No libtorch was found on this machine.")
        fix = FETCH
    return Advice(f"the linker cannot find libtorch: {_plural(['-l' + l for l in libs])}", detail, fix, subject=_plural(libs))


_CXX11_MARKS = ("__cxx11", "[abi:cxx11]", "St7__cxx11", "B5cxx11")


def _symbol_abi(symbol: str) -> str | None:
    if any(mark in symbol for mark in _CXX11_MARKS):
        return "cxx11"
    if "std::string" in symbol or "std::basic_string<" in symbol or (symbol.lstrip("_").startswith("Z") and "Ss" in symbol):
        return "pre-cxx11"
    return None


_FLAG = {"cxx11": "1", "pre-cxx11": "0"}
_NAME = {"cxx11": "the CXX11 std::string ABI", "pre-cxx11": "the old (pre-CXX11) std::string ABI"}


def _abi(match: Match, facts: MachineFacts) -> Advice:
    symbols = match.values("symbol")
    votes = [a for a in map(_symbol_abi, symbols) if a]
    program = max(set(votes), key=votes.count) if votes else None
    flags = [h.groups["flag"] for h in match.hits if "flag" in h.groups]  # in log order: the last one counts
    install = _install(facts)
    detail = [match.rule.cause]
    if program:
        detail.append(f"The missing symbols use {_NAME[program]}: the program was compiled with "
                      f"-D_GLIBCXX_USE_CXX11_ABI={_FLAG[program]}.")
    if flags:
        detail.append(f"Your command line has -D_GLIBCXX_USE_CXX11_ABI={flags[-1]}.")
    library = install.abi if install is not None and install.abi in _FLAG else None
    if library is None and program:
        library = "pre-cxx11" if program == "cxx11" else "cxx11"  # it lacks the program's variant
    if install is not None and install.abi in _FLAG:
        detail.append(f"The active {_where(install)} uses {_NAME[install.abi]} (evidence: {install.abi_source or 'probe'}).")
    if install is not None and program and install.abi == program:
        detail.append(f"That matches the program, so the libtorch it was linked or loaded with is another one: "
                      f"make -L and {loader_variable(facts.system)} point at {install.lib_dir}.")
        fix = f"{sh_prepend('LIBRARY_PATH', [str(install.lib_dir)])}; {sh_prepend(loader_variable(facts.system), [str(install.lib_dir)])}"
        title = "C++ ABI mismatch: the program was linked against another libtorch than the active one"
    elif library:
        value = _FLAG[library]
        fix = (f"compile with -D_GLIBCXX_USE_CXX11_ABI={value} (CMake: add ${{TORCH_CXX_FLAGS}} or link the Torch target; "
               f"tch-rs: LIBTORCH_CXX11_ABI={value})")
        version = install.version if install is not None else None
        if version and version_key(version)[:2] <= (2, 6):
            other = "pre-cxx11" if library == "cxx11" else "cxx11"
            fix += f"\nor fetch the {other} build of libtorch {version} (published up to 2.6)"
        title = (f"C++ ABI mismatch: the program uses {_NAME[program]}, libtorch {_NAME[library]}"
                 if program else "C++ ABI mismatch between the program and libtorch")
    else:
        fix, title = match.rule.fix, match.rule.title
    return Advice(title, detail, fix, subject=symbols[0] if symbols else "")


def _version(match: Match, facts: MachineFacts) -> Advice:
    install = _install(facts)
    detail = [match.rule.cause]
    expected, got = match.first("expected"), match.first("got")
    variant = install.variant if install is not None and install.variant else None
    if expected:
        title = f"tch-rs expects libtorch {expected}, found {got}"
        fix = (f"use libtorch {expected}: doctor fetch-libtorch --version {expected}"
               + (f" --variant {variant}" if variant else "")
               + f" && {SETENV}\n(or use the tch release made for {got}; LIBTORCH_BYPASS_VERSION_CHECK=1 skips the check at your own risk)")
        return Advice(title, detail, fix, subject=expected)
    headers = match.values("header")
    if headers:
        detail.append(f"{_plural(headers)} belonged to the TH/THC libraries, removed in PyTorch 1.11.")
        fix = ("build this code against libtorch ≤ 1.10, or port it to ATen (THC/THC.h → ATen/cuda/CUDAContext.h, "
               "THCudaCheck → C10_CUDA_CHECK)")
        return Advice(f"the code needs a libtorch older than 1.11 ({_plural(headers)} is gone)", detail, fix, subject=_plural(headers))
    ops = match.values("op")
    where = f"the active {_where(install)}" if install is not None else "the installed torch"
    if ops:
        detail.append(f"{_plural(ops)} is registered by torchvision's C++ extension, which failed to load for {where}.")
        version = install.version if install is not None else None
        fix = ("install the torchvision built for this torch"
               + (f" (torch {version} ↔ torchvision 0.{version_key(version)[1] + 15}.x)" if version and version_key(version)[:1] == (2,) else "")
               + ", from the same index (same cpu/cuXYZ variant)")
        return Advice("torchvision does not match torch", detail, fix, subject=_plural(ops))
    symbols = match.values("symbol")
    detail.append(f"The missing symbol{'s' * (len(symbols) > 1)} ({_plural(symbols[:3])}) take no std::string, so "
                  "this is not an ABI mismatch: the function does not exist in this libtorch version.")
    if install is not None:
        detail.append(f"The active libtorch is {install.label} at {install.root}.")
    fix = ("rebuild the extension against this libtorch (or reinstall the package built for it), "
           "or use the libtorch version it was built for: doctor fetch-libtorch --version <that version>")
    return Advice("an extension was built for another libtorch version", detail, fix, subject=symbols[0] if symbols else "")


_DRIVER_LIBS = ("libcuda.so", "libnvidia-ml.so", "libcuda.dylib")
_CUDA_RUNTIME = ("libcudart", "libcublas", "libcudnn", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnvrtc",
                 "libnvJitLink", "libnvToolsExt", "libnccl", "libcupti", "libcufile", "cudart64", "cublas64", "cudnn64", "nvrtc64")


def _loader(match: Match, facts: MachineFacts) -> Advice:
    libs = list(dict.fromkeys(match.values("lib")))
    system = _platform(match, facts)
    variable = loader_variable(system)
    install = _install(facts)
    detail = [match.rule.cause]
    driver = [l for l in libs if l.startswith(_DRIVER_LIBS)]
    runtime = [l for l in libs if l.startswith(_CUDA_RUNTIME)]
    torch_libs = [l for l in libs if l not in driver and l not in runtime]
    fixes = []
    if driver:
        detail.append(f"{_plural(driver)} belong{'s' * (len(driver) == 1)} to the NVIDIA driver, not to libtorch.")
        fixes.append("install/load the NVIDIA driver; in a container run with --gpus all (NVIDIA Container Toolkit); "
                     "on NixOS: " + _prepend("LD_LIBRARY_PATH", "/run/opengl-driver/lib"))
    if runtime:
        detail.append(f"{_plural(runtime)} {'is' if len(runtime) == 1 else 'are'} CUDA runtime libraries libtorch loads.")
        fixes.append("use a libtorch zip that bundles them, or install the matching nvidia-* wheels / CUDA toolkit and "
                     f"add their lib folder to {variable}")
    if torch_libs or not libs:
        if install is not None:
            lib_dir = str(install.lib_dir)
            missing = [l for l in torch_libs if facts.exists and not facts.exists(str(PurePath(lib_dir) / l))]
            if missing:
                detail.append(f"{_plural(missing)} {'is' if len(missing) == 1 else 'are'} not in the active {_where(install)}"
                              + (" (a CPU build): the program was built against a CUDA libtorch" if install.variant == "cpu"
                                 and any("cuda" in m for m in missing) else "") + ".")
            else:
                detail.append(f"{_plural(torch_libs) or 'libtorch'} {'is' if len(torch_libs) <= 1 else 'are'} in {lib_dir}.")
            if system == "Windows":
                fixes.append(f'{_prepend("PATH", lib_dir, "Windows")}   (or copy the DLLs next to the .exe; the '
                             "Visual C++ redistributable must be installed)")
            else:
                fixes.append(f"{sh_prepend(variable, [lib_dir])}\n(or link with {sh_paste('-Wl,-rpath,' + lib_dir)}; or {SETENV})")
        else:
            detail.append("No libtorch was found on this machine.")
            fixes.append(f"{FETCH}   (it puts libtorch's lib dir on {variable})")
    title = f"the loader cannot find {_plural(libs)}" if libs else match.rule.title
    return Advice(title, detail, "\n".join(fixes), subject=_plural(libs))


def _as_needed(match: Match, facts: MachineFacts) -> Advice:
    install = _install(facts)
    detail = [match.rule.cause]
    system = _platform(match, facts)
    text = " ".join(h.line for h in match.hits)
    if install is not None and install.variant == "cpu":
        detail.append(f"Also: the active {_where(install)} is a CPU build; it has no libtorch_cuda at all.")
    if system == "Windows" or "-INCLUDE:" in text:
        fix = "link with -INCLUDE:?warp_size@cuda@at@@YAHXZ (MSVC), or link the Torch CMake target"
    else:
        fix = ("link with -Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed (CMake: target_link_libraries(app "
               "\"${TORCH_LIBRARIES}\")); check with: ldd <binary> | grep torch_cuda")
    return Advice(match.rule.title, detail, fix, subject="libtorch_cuda")


def _no_device(match: Match, facts: MachineFacts) -> Advice:
    detail = [match.rule.cause]
    text = " ".join(h.line for h in match.hits)
    fixes = []
    visible = facts.env.get("CUDA_VISIBLE_DEVICES") if facts.env else None
    if visible is not None:
        detail.append(f"CUDA_VISIBLE_DEVICES is set here to {visible!r}" +
                      (": that hides every GPU." if visible.strip() in ("", "-1", "none", "NoDevFiles") else "."))
        fixes.append("unset CUDA_VISIBLE_DEVICES (or list existing GPU indices, from 0)")
    if "NVIDIA-SMI" in text or "NVIDIA driver" in text:
        detail.append("The driver itself does not answer (nvidia-smi fails or no driver is found).")
    fixes.append("install/load the NVIDIA driver until nvidia-smi works; in Docker: docker run --gpus all "
                 "(NVIDIA Container Toolkit); on a CPU-only machine use the CPU device")
    return Advice("no usable NVIDIA GPU: driver not loaded, or the GPU is hidden", detail, "\n".join(fixes))


def _cuda_variants(version: str | None, facts: MachineFacts) -> tuple[str, list[str]]:
    """The torch version to advise for (the active libtorch's, else the newest the release table
    knows, which is what `fetch-libtorch` without --version fetches) and the CUDA variants
    published for it, oldest CUDA first. A CUDA log comes from Linux or Windows, whatever
    this machine is."""
    from doctor.recommend import cuda_sorted, newest_release, published_variants

    system = "Windows" if facts.system == "Windows" else "Linux"
    version = version or newest_release()
    published = published_variants(version, system, facts.machine)
    if published is None:  # a release the table does not know yet: judge with the newest one's
        published = published_variants(newest_release(), system, facts.machine) or []
    return version, cuda_sorted(published)[::-1]


def _driver(match: Match, facts: MachineFacts) -> Advice:
    found = match.first("found")
    install = _install(facts)
    detail = [match.rule.cause]
    driver_cuda = parse_cuda_version(int(found)) if found and found.isdigit() else None
    fixes = []
    if driver_cuda:
        detail.append(f"The driver reports CUDA {driver_cuda} (found version {found}).")
    if install is not None and install.variant and install.variant.startswith("cu"):
        cuda = cuda_of_variant(install.variant)
        floor = floor_driver(cuda) if cuda else None
        if cuda:
            detail.append(f"The active {_where(install)} needs CUDA {cuda}" + (f": driver ≥ {floor}." if floor else "."))
            if floor:
                fixes.append(f"upgrade the NVIDIA driver to ≥ {floor}")
    if driver_cuda:
        version, variants = _cuda_variants(install.version if install is not None else None, facts)
        # Minor-version compatibility: a driver of CUDA N.x runs every N.x build.
        usable = [v for v in variants if version_key(cuda_of_variant(v) or "")[0] <= version_key(driver_cuda)[0]]
        if usable:
            fixes.append(f"or fetch a variant this driver runs: doctor fetch-libtorch --variant {usable[-1]} --version {version}")
        else:
            fixes.append(f"torch {version} has no build for CUDA {version_key(driver_cuda)[0]}.x: upgrade the driver, "
                         "or use an older libtorch (cu118 builds exist up to 2.7)")
    if not fixes:
        fixes.append("upgrade the NVIDIA driver (nvidia-smi shows the CUDA version it supports), or fetch an older "
                     "cuXYZ variant that it supports")
    title = f"the NVIDIA driver is too old (it supports CUDA {driver_cuda})" if driver_cuda else match.rule.title
    return Advice(title, detail, "\n".join(fixes), subject=found or "")


def _not_compiled(match: Match, facts: MachineFacts) -> Advice:
    install = _install(facts)
    detail = [match.rule.cause]
    if install is not None:
        if install.variant == "cpu":
            detail.append(f"The active {_where(install)} is indeed a CPU build.")
            fix = f"fetch a CUDA variant: doctor fetch-libtorch --variant cu126 && {SETENV} (pick the cuXYZ your driver supports)"
        elif install.variant and (install.variant.startswith("cu") or install.variant == "cuda"):
            detail.append(f"The active {_where(install)} is a CUDA build ({install.variant}): the program ran with another, "
                          "CPU-only libtorch, or libtorch_cuda was not loaded (see link.as-needed).")
            fix = (f"make the program load {install.lib_dir} ({loader_variable(facts.system)}), and link with "
                   "-Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed")
        else:
            fix = "fetch a cuXYZ variant: doctor fetch-libtorch --variant cu126"
    else:
        fix = "fetch a cuXYZ variant: doctor fetch-libtorch --variant cu126 (Python: pip install torch --index-url https://download.pytorch.org/whl/cu126)"
    return Advice("a CPU-only libtorch was asked to use CUDA", detail, fix, subject=match.first("backend") or "CUDA")


def _arch_unsupported(match: Match, facts: MachineFacts) -> Advice:
    sm = match.first("sm")
    capability = match.first("capability")
    if sm and not capability:
        digits = sm.removeprefix("sm_")
        capability = f"{digits[:-1]}.{digits[-1]}"
    gpu = match.first("gpu")
    supported = match.first("supported")
    install = _install(facts)
    detail = [match.rule.cause]
    if gpu and capability:
        detail.append(f"{gpu.strip()} has compute capability {capability}.")
    if supported:
        detail.append(f"The build has {supported.strip()}.")
    fix = match.rule.fix
    if capability:
        version, variants = _cuda_variants(install.version if install is not None else None, facts)
        good, sure = [], []
        for variant in variants:
            row = arch_list(variant, version, facts.machine)
            if row is not None and covers(row, capability).ok:
                good.append(variant)
                if not row.assumed:
                    sure.append(variant)
        if good:
            pick = (sure or good)[-1]
            fix = (f"fetch a variant with kernels for {capability}: doctor fetch-libtorch --variant {pick} --version {version}"
                   f"   (variants that have it: {_plural(good)})")
        else:
            fix = (f"no current build has kernels for compute capability {capability}: use an older torch release "
                   "that still supports it, or build libtorch from source with TORCH_CUDA_ARCH_LIST=" + capability)
    return Advice("the build has no kernels for this GPU" + (f" (compute capability {capability})" if capability else ""),
                  detail, fix, subject=capability or "")


def _oom(match: Match, facts: MachineFacts) -> Advice:
    detail = [match.rule.cause]
    device = match.first("device")
    amount = match.first("amount")
    raw = match.first("bytes")
    total, free = match.first("total"), match.first("free")
    if raw:
        from doctor.diagnose.common import human_bytes

        amount = human_bytes(int(raw))
        detail.append(f"One allocation asked for {amount} of host memory.")
        fix = ("the tensor does not fit in RAM: a smaller batch or input, or a machine with more memory "
               "(the request size is often a shape bug: check the shapes that reach this allocation)")
        return Advice(f"out of host memory (tried to allocate {amount})", detail, fix, subject=amount)
    if amount:
        detail.append(f"It tried to allocate {amount}" + (f" on a {total} device with {free} free." if total and free else "."))
    fix = ("a smaller batch size (or gradient accumulation); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when "
           "reserved-but-unallocated memory is large; free other processes on the GPU (nvidia-smi)")
    return Advice(f"{device or 'GPU'} out of memory" + (f" (tried to allocate {amount})" if amount else ""), detail, fix,
                  subject=amount or "")


ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "arch.mismatch": _arch,
    "glibc.too-old": _glibc,
    "macos.duplicate-rpath": _duplicate_rpath,
    "cmake.torch-not-found": _cmake,
    "cxx.std-too-old": _cxx_std,
    "headers.missing": _headers,
    "link.library-missing": _link,
    "abi.mismatch": _abi,
    "version.mismatch": _version,
    "loader.library-not-found": _loader,
    "link.as-needed": _as_needed,
    "cuda.no-device": _no_device,
    "cuda.driver-too-old": _driver,
    "cuda.not-compiled": _not_compiled,
    "cuda.arch-unsupported": _arch_unsupported,
    "memory.oom": _oom,
}

# The CUDA-stack ids (issue 13) keep their advisors in their own module.
from doctor.explain.cuda_advice import CUDA_ADVISORS  # noqa: E402

ADVISORS.update(CUDA_ADVISORS)

from doctor.explain.platform_advice import PLATFORM_ADVISORS  # noqa: E402  (issue 14: the log's platform)

ADVISORS.update(PLATFORM_ADVISORS)
