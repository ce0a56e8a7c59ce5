"""From what the log proved to what to do on this machine.

One function per diagnosis id turns the matched lines (and their named groups) plus the plain
facts of this machine the command layer gathered (doctor/explain/facts.py) into a concrete
title, explanation and fix: the exact -D flag, the directory to add, the variant to fetch. The
fix wording comes from doctor/fixes.py (shared with `check`), every version and variant fact
from the catalog. Without facts each falls back to the generic text of the pattern table, never
to a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.catalog.cuda import (
    DRIVER_LIBRARIES,
    NVML_LIBRARIES,
    arch_list,
    covers,
    cuda_of_variant,
    cuda_only_library,
    floor_driver,
    parse_cuda_version,
)
from doctor.catalog.platforms import library_file, loader_variable
from doctor.catalog.recommend import cuda_sorted, newest_release, published_variants
from doctor.catalog.releases import (
    SERIES,
    THC_REMOVED,
    glibc_needed,
    newest_series_for_glibc,
    newest_version,
    separate_project,
    series_name,
    torchvision_for,
)
from doctor.catalog.toolkit import cuda_library_prefixes
from doctor.explain.cuda_advice import CUDA_ADVISORS
from doctor.explain.facts import Advice, LibtorchFacts, MachineFacts, rule_advice
from doctor.explain.patterns import symbol_abi
from doctor.formats import clip, human_bytes, symbol_version_key, version_tuple
from doctor.model import Evidence
from doctor.quoting import sh_paste, sh_prepend

if TYPE_CHECKING:  # the engine calls advise(); advice only reads the Match it is given
    from doctor.explain.engine import Match

FETCH = fixes.FETCH
SETENV = fixes.SETENV

__all__ = ["ADVISORS", "Advice", "MachineFacts", "advise_with", "lookups"]


def advise_with(advisors: Mapping[str, Callable[[Match, MachineFacts], Advice]], match: Match,
                facts: MachineFacts | None) -> Advice:
    """The advice for one match from `advisors` (doctor.explain.advisors holds the full table)."""
    facts = facts or MachineFacts()
    rule = match.rule
    make = advisors.get(rule.id)
    advice = make(match, facts) if make else rule_advice(rule)
    install = _install(facts)
    if install is not None and rule.id != "cuda.no-device" and not rule.id.startswith("python."):
        advice.evidence.append(Evidence("derived", "active libtorch", f"{install.label} at {install.root}"))
    return advice


def lookups(match: Match, facts: MachineFacts) -> list[str]:
    """The files whose presence would make this match's advice concrete: the headers the log misses
    in each include dir, the libraries in the lib dir, nvcc under CUDA_HOME. The command layer looks
    them up and hands the answers back in `MachineFacts.looked` / `present`."""
    install = _install(facts)
    paths: list[str] = []
    rule = match.rule.id
    if install is not None and rule == "headers.missing":
        paths += [str(PurePath(d) / h.replace("\\", "/")) for h in match.values("header") for d in install.include_dirs]
    if install is not None and rule == "link.library-missing":
        system = _platform(match, facts)
        paths += [str(PurePath(install.lib_dir) / _lib_file(lib, system)) for lib in _libs_of(match)]
    if install is not None and rule == "loader.library-not-found":
        paths += [str(PurePath(install.lib_dir) / lib) for lib in match.values("lib")]
    if rule == "cuda.toolkit-not-found":
        home = facts.env.get("CUDA_HOME") or facts.env.get("CUDA_PATH")
        paths += ([f"{home}/bin/nvcc"] if home else []) + ["/usr/local/cuda/bin/nvcc"]
    return list(dict.fromkeys(paths))


# -- helpers --


def _install(facts: MachineFacts) -> LibtorchFacts | None:
    return facts.install


def _where(install) -> str:
    return f"libtorch {install.label} at {install.root}"


def _platform(match: Match, facts: MachineFacts) -> str:
    """The OS the log came from: its own words first (dyld, .dll, a Windows path a sign
    captured as `windows_path`), this machine otherwise."""
    if match.values("windows_path"):
        return "Windows"
    text = " ".join(h.line for h in match.hits)
    if "dyld" in text or ".dylib" in text or "Library not loaded" in text:
        return "Darwin"
    if ".dll" in text or "LNK1104" in text or "Could not find module" in text:
        return "Windows"
    if ".so" in text:
        return "Linux"
    return facts.system


def _prepend(var: str, value: str, system: str = "Linux") -> str:
    return fixes.prepend_path(var, value.split(";" if system == "Windows" else ":"), system)


_lib_file = library_file


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
    glibc_needs = sorted((n for n in needs if n.startswith("GLIBC_")), key=symbol_version_key)
    cxx_needs = sorted((n for n in needs if not n.startswith("GLIBC_")), key=symbol_version_key)
    if by:
        detail.append(f"Needed by {by[0]}.")
    fix_lines = []
    if glibc_needs:
        newest = glibc_needs[-1]
        have = facts.glibc
        detail.append(f"It needs {newest}" + (f"; this system has glibc {have}." if have else "."))
        install = _install(facts)
        fix_lines.append(_glibc_fix(newest.split("_", 1)[1], have, install.version if install is not None else None))
    if cxx_needs:
        newest = cxx_needs[-1]
        lib = next((s for s in sources if "stdc++" in s), None)
        detail.append(f"It needs {newest} from libstdc++" + (f", and the one loaded is {lib}." if lib else "."))
        if lib and ("conda" in lib or "/envs/" in lib or "mamba" in lib):
            fix_lines.append(fixes.conda_libstdcxx(lib))
        else:
            fix_lines.append(fixes.newer_libstdcxx())
    title = f"this system is too old for the library: {_plural(needs)} not available" if needs else match.rule.title
    return Advice(title, detail, "\n".join(fix_lines) or match.rule.fix, subject=_plural(needs))


def _glibc_fix(need: str, have: str | None, version: str | None = None) -> str:
    """A newer OS, or the newest libtorch the catalog says runs on this glibc. `version`: the active
    libtorch's, when the facts give it; the newest release (what fetch-libtorch takes) otherwise."""
    version = version or newest_version()
    text = f"run on a distribution with glibc ≥ {need}"
    floor = glibc_needed(version)
    if floor:
        text += f" (libtorch {series_name(version)} needs glibc {floor})"
    fits = newest_series_for_glibc(have) if have else None
    if fits:
        text += f", or use libtorch {fits} or older, which runs on this glibc {have}"
    else:
        older = [s.series for s in SERIES if glibc_needed(s.series) != floor]
        if older:
            text += f", or use a libtorch ≤ {older[-1]} (built for an older glibc)"
    return text


def _duplicate_rpath(match: Match, facts: MachineFacts) -> Advice:
    paths = match.values("path")
    path = paths[0] if paths else "<path>"
    detail = [match.rule.cause]
    fix = (f"drop one of the layers that adds -rpath {sh_paste(path)} (Hasktorch with executable-dynamic: Cabal already adds "
           f"it for extra-lib-dirs); to repair a built binary: install_name_tool -delete_rpath {sh_paste(path)} <binary> "
           "&& codesign -f -s - <binary>")
    return Advice(f"duplicate LC_RPATH '{path}'", detail, fix, subject=path)


def _map_failed(match: Match, facts: MachineFacts) -> Advice:
    libs = match.values("lib")
    lib = libs[0] if libs else "a library"
    why = match.values("why")
    cause = {"Operation not permitted": "noexec", "Cannot allocate memory": "limit"}.get(why[0]) if why else None
    folder = str(PurePath(lib).parent) if "/" in lib else None
    said = {"noexec": ": its file system is mounted noexec", "limit": ": the address-space limit is too small"}
    detail = [match.rule.cause]
    if cause:
        detail.append(f"The log gives the reason, '{why[0]}': " + ("a noexec mount." if cause == "noexec" else "an address-space limit."))
    return Advice(f"{lib} could not be mapped into memory{said.get(cause or '', '')}", detail,
                  fixes.unmappable_library(folder, cause), subject=lib)


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
    fix = fixes.cxx_standard(need)
    return Advice(f"libtorch needs C++{need}; the compiler ran an older standard", detail, fix, subject=f"c++{need}")


def _headers(match: Match, facts: MachineFacts) -> Advice:
    headers = [h.replace("\\", "/") for h in match.values("header")]
    install = _install(facts)
    detail = [match.rule.cause]
    if install is not None:
        dirs = [str(d) for d in install.include_dirs]
        located = []
        for header in headers:
            where = next((d for d in dirs if facts.has(str(PurePath(d) / header))), None)
            if where:
                located.append(f"{header} is in {where}" + (" (the second include dir, the one most often missed)"
                                                            if where == dirs[-1] and len(dirs) > 1 else ""))
            elif any(facts.lacks(str(PurePath(d) / header)) for d in dirs):
                located.append(f"{header} is not in the active {_where(install)}: the code expects another "
                               "libtorch version, or a header libtorch does not have")
        detail += located
        fix = fixes.include_dirs(dirs)
    else:
        detail.append("No libtorch was found on this machine.")
        fix = (f"{FETCH}\n(libtorch needs both <root>/include and <root>/include/torch/csrc/api/include on the "
               "include path)")
    detail, fix = _tilde_flags(match, detail, fix)
    return Advice(f"libtorch headers not found: {_plural(headers)}", detail, fix, subject=_plural(headers))


def _tilde_flags(match: Match, detail: list[str], fix: str) -> tuple[list[str], str]:
    """-I~/… or -L~/… on the command line: the ~ reached the compiler as a folder name."""
    hit = next((h for h in match.hits if h.groups.get("tilde")), None)
    if hit is None:
        return detail, fix
    flag, folder = hit.groups["flag"], clip(hit.groups["tilde"], 200)
    return ([*detail, f"The command line has {flag}{folder}: a shell expands ~ only at the start of a word, so the "
                      "compiler looked in a folder named ~ under the build's folder."],
            f'write {flag}"$HOME{folder[1:]}" instead of {flag}{folder}; or ' + fix)


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
        absent = [lib for lib in libs if facts.lacks(str(PurePath(lib_dir) / _lib_file(lib, system)))]
        present = [lib for lib in libs if facts.has(str(PurePath(lib_dir) / _lib_file(lib, system)))]
        if present:
            detail.append(f"{_plural(_lib_file(l, system) for l in present)} {'is' if len(present) == 1 else 'are'} in {lib_dir}.")
        if absent:
            detail.append(f"{_plural(_lib_file(l, system) for l in absent)} {'is' if len(absent) == 1 else 'are'} not part of "
                          f"the active {_where(install)}"
                          + (": a CPU build has no CUDA libraries" if (install.variant == "cpu" and any("cuda" in a for a in absent)) else "")
                          + ".")
        # The tree's lib dir is the fix for what it holds, never for what it lacks.
        fix_lines = [fixes.link_dir(lib_dir, system)] if present or not absent else []
        cpu_lacks = [l for l in absent if install.variant == "cpu" and cuda_only_library(_lib_file(l, system))]
        if cpu_lacks:
            fix_lines.append(f"for {_plural(['-l' + l for l in cpu_lacks])}: drop them, or "
                             + _cuda_build_fetch(install.version, facts))
        other = [l for l in absent if l not in cpu_lacks]  # a damaged or partial tree
        if other:
            fix_lines.append(f"for {_plural(['-l' + l for l in other])}: install a complete libtorch: {FETCH}")
        fix = "\n".join(fix_lines)
    else:
        detail.append("No libtorch was found on this machine.")
        fix = FETCH
    detail, fix = _tilde_flags(match, detail, fix)
    return Advice(f"the linker cannot find libtorch: {_plural(['-l' + l for l in libs])}", detail, fix, subject=_plural(libs))


_FLAG = fixes.ABI_FLAG
_NAME = {"cxx11": "the CXX11 std::string ABI", "pre-cxx11": "the old (pre-CXX11) std::string ABI"}


def _abi(match: Match, facts: MachineFacts) -> Advice:
    symbols = match.values("symbol")
    votes = [a for a in map(symbol_abi, symbols) if a]
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
        fix = fixes.build_with_abi(library)
        version = install.version if install is not None else None
        other = fixes.other_abi_build(version, "pre-cxx11" if library == "cxx11" else "cxx11")
        if other:
            fix += "\n" + other
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
        fix = (f"use libtorch {expected}: {fixes.fetch_and_setenv(expected, variant)}\n(or use the tch release made for {got}; LIBTORCH_BYPASS_VERSION_CHECK=1 skips the check at your own risk)")
        return Advice(title, detail, fix, subject=expected)
    headers = match.values("header")
    if headers:
        detail.append(f"{_plural(headers)} belonged to the TH/THC libraries, removed in PyTorch {THC_REMOVED}.")
        fix = (f"build this code against a libtorch older than {THC_REMOVED}, or port it to ATen (THC/THC.h → "
               "ATen/cuda/CUDAContext.h, THCudaCheck → C10_CUDA_CHECK)")
        return Advice(f"the code needs a libtorch older than {THC_REMOVED} ({_plural(headers)} is gone)", detail, fix,
                      subject=_plural(headers))
    ops = match.values("op")
    where = f"the active {_where(install)}" if install is not None else "the installed torch"
    if ops:
        detail.append(f"{_plural(ops)} is registered by torchvision's C++ extension, which failed to load for {where}.")
        version = install.version if install is not None else None
        vision = torchvision_for(version) if version else None
        fix = ("install the torchvision built for this torch"
               + (f" (torch {version} ↔ torchvision {vision}.x)" if vision else "")
               + ", from the same index (same cpu/cuXYZ variant)")
        return Advice("torchvision does not match torch", detail, fix, subject=_plural(ops))
    symbols = match.values("symbol")
    many = len(symbols) > 1
    detail.append(f"The missing symbol{'s' * many} ({_plural(symbols[:3])}) take{'' if many else 's'} no std::string, "
                  "so this is not an ABI mismatch: the function does not exist in this libtorch version.")
    if install is not None:
        detail.append(f"The active libtorch is {install.label} at {install.root}.")
    fix = ("rebuild the extension against this libtorch (or reinstall the package built for it), "
           "or use the libtorch version it was built for: doctor fetch-libtorch --version <that version>")
    return Advice("an extension was built for another libtorch version", detail, fix, subject=symbols[0] if symbols else "")


# The driver's libraries and the CUDA runtime's, by file-name prefix: the catalog's lists.
_DRIVER_LIBS = tuple(dict.fromkeys(name.split(".so")[0] + ".so" for name in (*DRIVER_LIBRARIES, *NVML_LIBRARIES)))
_CUDA_RUNTIME = cuda_library_prefixes()


def _loader(match: Match, facts: MachineFacts) -> Advice:
    libs = list(dict.fromkeys(match.values("lib")))
    system = _platform(match, facts)
    variable = loader_variable(system)
    install = _install(facts)
    lib_dir = str(install.lib_dir) if install is not None else None
    detail = [match.rule.cause]
    driver = [l for l in libs if l.startswith(_DRIVER_LIBS)]
    runtime = [l for l in libs if l.startswith(_CUDA_RUNTIME)]
    # torchvision's or torchaudio's library: in no libtorch (unless someone copied it into the active one)
    separate = [l for l in libs if l not in driver and l not in runtime and separate_project(l)
                and not (lib_dir and facts.has(str(PurePath(lib_dir) / l)))]
    torch_libs = [l for l in libs if l not in driver and l not in runtime and l not in separate]
    fix_lines = []
    if driver:
        detail.append(f"{_plural(driver)} belong{'s' * (len(driver) == 1)} to the NVIDIA driver, not to libtorch.")
        fix_lines.append("install/load the NVIDIA driver; in a container run with --gpus all (NVIDIA Container Toolkit); "
                     "on NixOS: " + _prepend("LD_LIBRARY_PATH", "/run/opengl-driver/lib"))
    if runtime:
        detail.append(f"{_plural(runtime)} {'is' if len(runtime) == 1 else 'are'} CUDA runtime libraries libtorch loads.")
        fix_lines.append("use a libtorch zip that bundles them, or install the matching nvidia-* wheels / CUDA toolkit and "
                     f"add their lib folder to {variable}")
    for lib in separate:
        project = separate_project(lib)
        detail.append(f"{lib} is not part of libtorch: it is {project}'s C++ library, built and installed separately.")
        version = install.version if install is not None else None
        release = torchvision_for(version) if project == "torchvision" and version else None
        fix_lines.append(fixes.separate_library(lib, project, release, system))
    if torch_libs or not libs:
        cuda = [l for l in torch_libs if cuda_only_library(l)]
        if install is not None:
            # A library the active tree lacks is not found through its lib dir: the fix is what provides it.
            missing = [l for l in torch_libs if facts.lacks(str(PurePath(lib_dir) / l))]
            cpu_lacks = [l for l in missing if l in cuda and install.variant == "cpu"]
            other = [l for l in missing if l not in cpu_lacks]
            if missing:
                detail.append(f"{_plural(missing)} {'is' if len(missing) == 1 else 'are'} not in the active {_where(install)}"
                              + (" (a CPU build): the program was built against a CUDA libtorch" if cpu_lacks else "") + ".")
            elif torch_libs and all(facts.has(str(PurePath(lib_dir) / l)) for l in torch_libs):
                detail.append(f"{_plural(torch_libs)} {'is' if len(torch_libs) <= 1 else 'are'} in {lib_dir}.")
            elif not torch_libs:
                detail.append(f"libtorch's libraries are in {lib_dir}.")
            if cpu_lacks:
                fix_lines.append(_cuda_build_fetch(install.version, facts))
            if other:
                fix_lines.append(f"add the lib folder of the libtorch the program was built against to {variable}, or "
                                 f"rebuild the program against {lib_dir}")
            if missing:  # never the loader path of a tree that lacks what the program needs
                pass  # the lines above say what provides it
            elif system == "Windows":
                fix_lines.append(f'{_prepend("PATH", lib_dir, "Windows")}   (or copy the DLLs next to the .exe; the '
                                 "Visual C++ redistributable must be installed)")
            else:
                fix_lines.append(f"{fixes.loader_path(lib_dir, system)}\n(or link with {fixes.rpath_flag(lib_dir)}; or {SETENV})")
        else:
            detail.append("No libtorch was found on this machine.")
            if cuda:
                fix_lines.append(_cuda_build_fetch(None, facts))
            else:
                fix_lines.append(f"{FETCH}   (it puts libtorch's lib dir on {variable})")
    title = f"the loader cannot find {_plural(libs)}" if libs else match.rule.title
    return Advice(title, detail, "\n".join(fix_lines), subject=_plural(libs))


def _cuda_build_fetch(version: str | None, facts: MachineFacts) -> str:
    """Fetch a CUDA build of `version` (the newest release when unknown), by its variant's name: `--variant
    auto` fetches the CPU build on a machine without an NVIDIA driver, where a program built against a
    CUDA libtorch still needs one to load."""
    version, variants = _cuda_variants(version, facts)
    if not variants:
        return f"fetch a CUDA build of libtorch {version}"
    base = ".".join(map(str, version_tuple(version)[:3]))
    return (f"fetch a CUDA build of libtorch {base}: {fixes.fetch_and_setenv(base, variants[-1])}   (published: "
            f"{_plural(variants[::-1])}; take the CUDA the program was built with)")


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
        fix = fixes.link_no_as_needed()
    return Advice(match.rule.title, detail, fix, subject="libtorch_cuda")


def _no_device(match: Match, facts: MachineFacts) -> Advice:
    detail = [match.rule.cause]
    text = " ".join(h.line for h in match.hits)
    fix_lines = []
    visible = facts.env.get("CUDA_VISIBLE_DEVICES") if facts.env else None
    if visible is not None:
        detail.append(f"CUDA_VISIBLE_DEVICES is set here to {visible!r}" +
                      (": that hides every GPU." if visible.strip() in ("", "-1", "none", "NoDevFiles") else "."))
        fix_lines.append(fixes.unhide_gpus())
    if "Insufficient Permissions" in text:
        detail.append("The driver answers, but not to this user: it may not open /dev/nvidia*.")
        fix_lines.append(fixes.gpu_device_access())
    else:
        if "NVIDIA-SMI" in text or "NVIDIA driver" in text:
            detail.append("The driver itself does not answer (nvidia-smi fails or no driver is found).")
        fix_lines.append(fixes.no_device())
    return Advice("no usable NVIDIA GPU: driver not loaded, or the GPU is hidden", detail, "\n".join(fix_lines))


def _cuda_variants(version: str | None, facts: MachineFacts) -> tuple[str, list[str]]:
    """The torch version to advise for (the active libtorch's, else the newest the release table
    knows, which is what `fetch-libtorch` without --version fetches) and the CUDA variants
    published for it, oldest CUDA first. A CUDA log comes from Linux or Windows, whatever
    this machine is."""
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
    fix_lines = []
    if driver_cuda:
        detail.append(f"The driver reports CUDA {driver_cuda} (found version {found}).")
    if install is not None and install.variant and install.variant.startswith("cu"):
        cuda = cuda_of_variant(install.variant)
        floor = floor_driver(cuda) if cuda else None
        if cuda:
            detail.append(f"The active {_where(install)} needs CUDA {cuda}" + (f": driver ≥ {floor}." if floor else "."))
            if floor:
                fix_lines.append(fixes.driver_upgrade(floor))
    if driver_cuda:
        version, variants = _cuda_variants(install.version if install is not None else None, facts)
        # Minor-version compatibility: a driver of CUDA N.x runs every N.x build.
        major = version_tuple(driver_cuda)[0]
        usable = [v for v in variants if version_tuple(cuda_of_variant(v) or "0")[0] <= major]
        if usable:
            fix_lines.append(f"or fetch a variant this driver runs: {fixes.fetch(version, usable[-1])}")
        else:
            fix_lines.append(f"torch {version} has no build for CUDA {major}.x: upgrade the driver, "
                         "or use an older libtorch" + _older_for_cuda_major(major))
    if not fix_lines:
        fix_lines.append(fixes.driver_upgrade() + ", or fetch an older cuXYZ variant that it supports")
    title = f"the NVIDIA driver is too old (it supports CUDA {driver_cuda})" if driver_cuda else match.rule.title
    return Advice(title, detail, "\n".join(fix_lines), subject=found or "")


def _cuda_fetch(version: str | None, setenv: bool = False) -> str:
    """Fetch a CUDA build of `version` (the newest release when unknown), naming the variants the catalog has."""
    version = version or newest_release()
    published = [v for v in (published_variants(version) or []) if v.startswith("cu")]
    if not published:
        version = newest_release()
        published = [v for v in (published_variants(version) or []) if v.startswith("cu")]
    variants = cuda_sorted(published)[::-1]
    base = ".".join(map(str, version_tuple(version)[:3]))
    command = fixes.fetch_and_setenv(base, "auto") if setenv else fixes.fetch(base, "auto")
    return (f"{command}   (auto picks the CUDA variant this machine's driver runs; "
            f"published for {base}: {_plural(variants)})")


def _older_for_cuda_major(major: int) -> str:
    """", e.g. cu118 builds exist up to 2.7": the newest series with a build for this CUDA major, from the catalog."""
    best: tuple[str, str] | None = None
    for s in SERIES:
        for v in s.cuda:
            if version_tuple(cuda_of_variant(v) or "0")[0] <= major:
                best = (v, s.series)
    return f" ({best[0]} builds exist up to {best[1]})" if best else ""


def _not_compiled(match: Match, facts: MachineFacts) -> Advice:
    install = _install(facts)
    detail = [match.rule.cause]
    if install is not None:
        if install.variant == "cpu":
            detail.append(f"The active {_where(install)} is indeed a CPU build.")
            fix = f"fetch a CUDA variant: {_cuda_fetch(install.version, setenv=True)}"
        elif install.variant and (install.variant.startswith("cu") or install.variant == "cuda"):
            detail.append(f"The active {_where(install)} is a CUDA build ({install.variant}): the program ran with another, "
                          "CPU-only libtorch, or libtorch_cuda was not loaded (see link.as-needed).")
            fix = (f"make the program load {install.lib_dir} ({loader_variable(facts.system)}), and link with "
                   "-Wl,--no-as-needed -ltorch_cuda -Wl,--as-needed")
        else:
            fix = f"fetch a cuXYZ variant: {_cuda_fetch(install.version)}"
    else:
        fix = (f"fetch a cuXYZ variant: {_cuda_fetch(None)} (Python: pip install torch --index-url "
               "https://download.pytorch.org/whl/<that variant>)")
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
            fix = (f"fetch a variant with kernels for {capability}: {fixes.fetch(version, pick)}"
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


ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {**CUDA_ADVISORS,
    "arch.mismatch": _arch,
    "glibc.too-old": _glibc,
    "macos.duplicate-rpath": _duplicate_rpath,
    "loader.map-failed": _map_failed,
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
