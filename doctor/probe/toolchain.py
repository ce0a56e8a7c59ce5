"""Compilers and build tools: versions, the newest -std each accepts, ABI flags in the environment."""

from __future__ import annotations

import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field

from doctor.host import Host
from doctor.model import Evidence
from doctor.record import record

STANDARDS = (26, 23, 20, 17, 14)  # probed newest first; the first accepted wins
FIRST_STANDARDS = 2  # probed at once with --version: a current compiler accepts one of them


@record
class Compiler:
    """One C++ compiler: version and the newest -std it accepts."""
    name: str  # "g++", "clang++", or $CXX
    path: str
    version: str | None
    max_std: int | None  # 23 for -std=c++23
    evidence: list[Evidence] = field(default_factory=list)
    problem: str | None = None  # "did not answer in 5 s", "exit status 1": why version/max_std are unknown


@record
class Tool:
    """A build tool (cmake, nvcc) and its version."""
    name: str
    path: str | None
    version: str | None
    evidence: list[Evidence] = field(default_factory=list)
    problem: str | None = None  # found on PATH but no version: why


@record
class ToolchainFacts:
    """Compilers, build tools and the ABI/-std flags set in the environment."""
    compilers: list[Compiler]
    cmake: Tool
    nvcc: Tool
    abi_flags: list[tuple[str, str]]  # (variable, "0"/"1") from CXXFLAGS / CPPFLAGS
    std_flags: list[tuple[str, int]]  # (variable, 17) from -std=c++17 in CXXFLAGS
    problems: list[str] = field(default_factory=list)  # probe failures (timeouts), not verdicts
    cxx_missing: str | None = None  # the program $CXX names, when it is not found


def parse_compiler_version(text: str) -> str | None:
    """"12.2.0" from `g++ --version` / `clang++ --version` first lines."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    m = re.search(r"(?:version\s+|\)\s+)(\d+\.\d+(?:\.\d+)?)", first) or re.search(r"(\d+\.\d+\.\d+)", first)
    return m.group(1) if m else None


def parse_cmake_version(text: str) -> str | None:
    m = re.search(r"cmake version (\S+)", text)
    return m.group(1) if m else None


def parse_nvcc_version(text: str) -> str | None:
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_flags(value: str) -> tuple[list[str], list[int]]:
    """ABI values and -std levels named in a CXXFLAGS-like string."""
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    abis = [m.group(1) for w in words if (m := re.fullmatch(r"-D_GLIBCXX_USE_CXX11_ABI=([01])", w))]
    stds = [int(m.group(1)) for w in words if (m := re.fullmatch(r"-std=(?:c|gnu)\+\+(\d+)", w))]
    return abis, stds


def run_problem(run, timeout: float) -> str | None:
    """Why a `--version` run gave no answer, in the words the report uses."""
    if run.timed_out:
        return f"did not answer in {timeout:g} s"
    if run.returncode is None:
        return run.error or "could not be started"
    if run.returncode != 0:
        return f"exit status {run.returncode}"
    return None


def _probe_compiler(host: Host, name: str, path: str, timeout: float) -> Compiler:
    # `--version` and the two newest -std probes start together (they are the check's critical
    # path, issue 19); the older standards are asked only when both of those are refused.
    with ThreadPoolExecutor(max_workers=1 + FIRST_STANDARDS) as pool:
        version_run = pool.submit(host.ask, [path, "--version"], timeout=timeout)
        early = [pool.submit(_std_probe, host, path, std, timeout) for std in STANDARDS[:FIRST_STANDARDS]]
        run = version_run.result()
        probes = [(std, f.result()) for std, f in zip(STANDARDS, early)]
    version = parse_compiler_version(run.stdout) if run.ok else None
    compiler = Compiler(name, path, version, None)
    compiler.problem = run_problem(run, timeout) or (None if version else "printed no version number")
    said = run.stdout.splitlines() or run.stderr.splitlines() or [run.error or f"exit status {run.returncode}"]
    compiler.evidence.append(Evidence("command", f"{name} --version", said[0][:300] if said else ""))
    if not run.ok:
        return compiler
    rest = iter(STANDARDS[FIRST_STANDARDS:])
    while True:
        for std, probe in probes:
            if probe.timed_out:  # one hang is enough: five would cost 5 × the timeout
                compiler.problem = f"-std=c++{std} -fsyntax-only did not answer in {timeout:g} s"
                return compiler
            if probe.ok:
                compiler.max_std = std
                compiler.evidence.append(Evidence("command", f"{name} -std=c++{std} -fsyntax-only -x c++ -", "accepted"))
                return compiler
        std = next(rest, None)
        if std is None:
            return compiler
        probes = [(std, _std_probe(host, path, std, timeout))]


def _std_probe(host: Host, path: str, std: int, timeout: float):
    return host.run([path, f"-std=c++{std}", "-fsyntax-only", "-x", "c++", "-"], timeout=timeout, input="")


def _probe_tool(host: Host, name: str, parse, timeout: float) -> Tool:
    path = host.which(name)
    if not path:
        return Tool(name, None, None)
    run = host.ask([path, "--version"], timeout=timeout)
    version = parse(run.stdout) if run.ok else None
    lines = [line for line in run.stdout.splitlines() if line.strip()] if run.ok else [run.error or f"exit status {run.returncode}"]
    excerpt = next((line for line in lines if version and version in line), lines[0] if lines else "")
    problem = run_problem(run, timeout) or (None if version else "printed no version number")
    return Tool(name, path, version, [Evidence("command", f"{name} --version", excerpt.strip()[:300])], problem)


def detect_toolchain(host: Host, timeout: float | None = None) -> ToolchainFacts:
    if timeout is None:  # the same DOCTOR_PROBE_TIMEOUT as the GPU probes
        from doctor.probe.devices import probe_timeout

        timeout = probe_timeout(host)
    wanted: list[tuple[str, str]] = []
    cxx_missing = None
    cxx = host.env.get("CXX")
    if cxx:
        try:
            words = shlex.split(cxx)
        except ValueError:  # an unbalanced quote: make and CMake would fail on it too
            words = cxx.split()
        exe = words[0] if words else cxx
        path = host.which(exe)
        if path:
            wanted.append((f"$CXX ({exe})", path))
        else:
            cxx_missing = exe
    for name in ("g++", "clang++"):
        path = host.which(name)
        if path and all(path != p for _, p in wanted):
            wanted.append((name, path))
    with ThreadPoolExecutor(max_workers=4) as pool:
        compilers = [pool.submit(_probe_compiler, host, n, p, timeout) for n, p in wanted]
        cmake = pool.submit(_probe_tool, host, "cmake", parse_cmake_version, timeout)
        nvcc = pool.submit(_probe_tool, host, "nvcc", parse_nvcc_version, timeout)
        facts = ToolchainFacts([c.result() for c in compilers], cmake.result(), nvcc.result(), [], [], cxx_missing=cxx_missing)
    for variable in ("CXXFLAGS", "CPPFLAGS", "CFLAGS"):
        abis, stds = parse_flags(host.env.get(variable, ""))
        facts.abi_flags.extend((variable, a) for a in abis)
        facts.std_flags.extend((variable, s) for s in stds)
    for c in facts.compilers:
        if c.problem:
            facts.problems.append(f"{c.name} at {c.path}: {c.problem}")
    for tool in (facts.cmake, facts.nvcc):
        if tool.problem:
            facts.problems.append(f"{tool.name} at {tool.path}: {tool.problem}")
    return facts
