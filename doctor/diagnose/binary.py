"""The Binary area (`doctor check --binary`): a built program against what the loader gives it."""

from __future__ import annotations

from doctor import fixes
from doctor.formats import symbol_version_key as version_key
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.binary import BinaryFacts


def binary_area(b: BinaryFacts, active_abi: str | None = None) -> Area:
    """`active_abi` is the active libtorch's ABI, used when the program's libtorch does not resolve."""
    if not b.readable:
        finding = Finding("binary.unreadable", Level.ERROR, f"cannot inspect {b.path}: {b.error}",
                          fix="pass a built program, extension module (.so) or shared library", area="binary",
                          evidence=[Evidence("file", b.path, b.error)], subject=b.path)
        return Area("binary", "Binary", f"{b.path}: {b.error}", findings=[finding])
    findings: list[Finding] = []
    details = [f"{r.name} → {r.path or 'NOT FOUND'}" + (f" (via {r.via})" if r.via else "") for r in b.needed]
    details.append(f"RUNPATH: {':'.join(b.runpath) or '-'}; RPATH: {':'.join(b.rpath) or '-'}")
    missing = [r for r in b.needed if r.path is None]
    for r in missing:
        findings.append(Finding(
            "loader.library-not-found", Level.ERROR, f"{b.path} needs {r.name}, which the loader cannot find",
            fix=f"add the directory holding {r.name} to LD_LIBRARY_PATH, or relink with -Wl,-rpath,<that dir>",
            area="binary", evidence=b.evidence[:1], subject=f"{b.path}:{r.name}"))
    needed_names = {r.name for r in b.needed}
    if b.torch_cuda_beside and "libtorch_cuda.so" not in needed_names:
        findings.append(Finding(
            "link.as-needed", Level.ERROR,
            f"{b.path} was linked against a CUDA libtorch ({b.torch_lib_dir}) but does not need libtorch_cuda.so",
            detail="The linker's --as-needed dropped libtorch_cuda.so because the program calls none of its "
                   "symbols directly; its CUDA kernels then never register and CUDA is silently unavailable "
                   "(\"Cannot initialize CUDA without ATen_cuda library\").",
            fix="re" + fixes.link_no_as_needed(),
            area="binary", evidence=b.evidence[:1] + [Evidence("file", f"{b.torch_lib_dir}/libtorch_cuda.so", "exists")],
            subject=b.path))
    program_abi = b.program_abi
    torch_abi = b.torch_abi_loaded or active_abi
    if program_abi and torch_abi and program_abi != torch_abi:
        findings.append(Finding(
            "abi.mismatch", Level.ERROR,
            f"{b.path} calls libtorch with the {program_abi} std::string; the libtorch it gets uses {torch_abi}",
            detail=f"{b.undefined_torch_cxx11} undefined c10/at/torch symbols take std::__cxx11::string, "
                   f"{b.undefined_torch_old} the old std::string: they will be undefined symbols at load time.",
            fix=f"rebuild with {fixes.abi_define(torch_abi)}, or run it with the {program_abi} libtorch it was built for",
            area="binary", evidence=[e for e in b.evidence if "std::" in e.excerpt][:1] + b.evidence[:1],
            subject=b.path))
    wanted = b.version_needs.get("libstdc++.so.6", [])
    if wanted and b.libstdcxx:
        have = set(b.libstdcxx_versions)
        lacking = sorted((v for v in wanted if v not in have), key=version_key)
        if lacking:
            findings.append(Finding(
                "glibc.too-old", Level.ERROR,
                f"{b.path} needs {', '.join(lacking)}; the loader gives it {b.libstdcxx}",
                detail=f"that libstdc++ defines up to {_newest(have, 'GLIBCXX')} / {_newest(have, 'CXXABI')}. "
                       "A conda environment's older libstdc++ on LD_LIBRARY_PATH is the usual cause.",
                fix="put a newer libstdc++ first: conda install -c conda-forge 'libstdcxx-ng>=13' (or drop "
                    "$CONDA_PREFIX/lib from LD_LIBRARY_PATH so the system's is used)",
                area="binary", evidence=[e for e in b.evidence if e.source == b.libstdcxx][:1]
                + [Evidence("elf", b.path, f"needs {', '.join(lacking)}")], subject=b.path))
    if b.unresolved_count and not missing:
        findings.append(Finding(
            "binary.symbol-unresolved", Level.ERROR,
            f"{b.unresolved_count} undefined symbol(s) of {b.path} are defined by no library it loads",
            detail="first: " + ", ".join(b.unresolved_symbols[:5]),
            fix="link the library that defines them (a missing -l), or run with the library version it was built "
                "against (`doctor check` names the active libtorch)",
            area="binary", evidence=b.evidence[:1], subject=b.path))
    summary = f"{b.path}: {len(b.needed)} NEEDED, {len(missing)} not found"
    if program_abi:
        summary += f", libtorch ABI {program_abi}"
    return Area("binary", "Binary", summary, details, findings)


def _newest(names, prefix: str) -> str:
    chosen = [n for n in names if n.startswith(prefix + "_")]
    return max(chosen, key=version_key) if chosen else "none"
