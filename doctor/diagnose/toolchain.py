"""The Toolchain area: a C++ compiler new enough for libtorch, and ABI flags that agree with it."""

from __future__ import annotations

from doctor import fixes
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.libtorch import LibtorchInstall
from doctor.probe.toolchain import ToolchainFacts


def toolchain_area(t: ToolchainFacts, active: LibtorchInstall | None) -> Area:
    details = [f"{c.name}: {_compiler_line(c)} at {c.path}" for c in t.compilers]
    details.append(f"cmake: {_tool_state(t.cmake)}")
    details.append(f"nvcc: {_tool_state(t.nvcc)}")
    findings: list[Finding] = []
    need = active.cxx_standard if active else None
    if not t.compilers:
        findings.append(
            Finding("toolchain.compiler-missing", Level.WARNING, "no C++ compiler found (g++, clang++ or $CXX)",
                    fix="sudo apt-get install g++   (Fedora: dnf install gcc-c++; macOS: xcode-select --install)",
                    area="toolchain")
        )
    if t.cxx_missing:
        findings.append(
            Finding("toolchain.compiler-missing", Level.WARNING,
                    f"$CXX names {t.cxx_missing}, which is not found: builds use $CXX before any compiler on PATH",
                    detail="make, CMake (CMAKE_CXX_COMPILER's default), setup.py and tch-rs's cc build all compile "
                    "with $CXX when it is set, so they fail although a compiler is installed.",
                    fix=fixes.cxx_not_found(), area="toolchain", evidence=[Evidence("env", "CXX", t.cxx_missing)],
                    subject="CXX")
        )
    for c in t.compilers:
        if need and c.max_std is not None and c.max_std < need:
            findings.append(
                Finding(
                    "cxx.std-too-old",
                    Level.ERROR,
                    f"{c.name} {c.version} accepts at most -std=c++{c.max_std}; libtorch {active.label} needs C++{need}",
                    fix=fixes.newer_compiler(need),
                    area="toolchain",
                    evidence=c.evidence,
                    subject=c.path,
                )
            )
    for variable, std in t.std_flags:
        if need and std < need:
            findings.append(
                Finding("cxx.std-too-old", Level.ERROR, f"{variable} asks for -std=c++{std}; libtorch needs C++{need}",
                        fix=f"use -std=c++{need} in {variable}", area="toolchain",
                        evidence=[Evidence("env", variable, f"-std=c++{std}")], subject=variable)
            )
    if active and active.abi in fixes.ABI_FLAG:
        want = fixes.ABI_FLAG[active.abi]
        for variable, value in t.abi_flags:
            if value != want:
                findings.append(
                    Finding(
                        "abi.mismatch",
                        Level.ERROR,
                        f"{variable} has -D_GLIBCXX_USE_CXX11_ABI={value}, but libtorch at {active.root} uses the {active.abi} ABI",
                        detail="Code compiled with a different std::string layout fails to link against libtorch "
                        "(undefined reference to c10::...(std::string const&)).",
                        fix=f"use {fixes.abi_define(active.abi)} in {variable} (or remove it)",
                        area="toolchain",
                        evidence=[Evidence("env", variable, f"-D_GLIBCXX_USE_CXX11_ABI={value}")]
                        + [e for e in active.evidence if "ABI" in e.excerpt or "string" in e.excerpt][:1],
                        subject=variable,
                    )
                )
    for problem in t.problems:
        findings.append(Finding("probe.failed", Level.WARNING, f"could not determine a tool's version: {problem}",
                                fix=f"run `{problem.split(' at ')[0]} --version` yourself; a hung or broken tool breaks builds too",
                                area="toolchain", subject=problem.split(":")[0]))
    summary = _best_compiler(t)
    if need:
        summary += f"; libtorch needs C++{need}"
    summary += f"; cmake {_tool_state(t.cmake, missing='missing')}"
    return Area("toolchain", "Toolchain", summary, details, findings)


def _compiler_line(c) -> str:
    if c.version is None:
        return f"unusable ({c.problem or 'no version'})"
    std = f"newest -std=c++{c.max_std}" if c.max_std else f"-std level unknown ({c.problem or 'none accepted'})"
    return f"{c.version}, {std}"


def _best_compiler(t: ToolchainFacts) -> str:
    """The summary's compiler: the best one that answered; else why none did (never 'None')."""
    usable = [c for c in t.compilers if c.version]
    if usable:
        best = max(usable, key=lambda c: c.max_std or 0)
        return f"{best.name} {best.version}" + (f" (up to C++{best.max_std})" if best.max_std else f" ({best.problem or 'no -std accepted'})")
    if t.compilers:
        c = t.compilers[0]
        return f"{c.name} {c.problem or 'gave no version'}"
    return "no C++ compiler"


def _tool_state(tool, missing: str = "not found") -> str:
    if tool.version:
        return tool.version
    if tool.path:  # on PATH: never "missing"
        return f"at {tool.path}, {tool.problem or 'version unknown'}"
    return missing
