"""The build probe behind `doctor check --build`: proof that headers, ABI, linker and loader agree.

It compiles, links and runs a tiny program against the active libtorch using only what the
doctor would emit — the environment of `doctor emit setenv` (doctor.emit.variables) and the ABI
flag the CMake emitter sets — plus the user's own CXX / CXXFLAGS / LDFLAGS, so a stray
`CXXFLAGS=-D_GLIBCXX_USE_CXX11_ABI=0` breaks the probe exactly as it breaks the user's build.
A failure goes through `doctor explain`, so it ends in the same findings as a real build log.

mode "c10": one c10 call (`c10::Device(std::string)`, which also proves the std::string ABI),
about a second. mode "full": <torch/torch.h> and a tensor op, about 17 s on 2 cores.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import field

from doctor import fixes
from doctor.host import Host, RunResult
from doctor.model import Area, Evidence, Finding, Level
from doctor.record import record

MARK = "torch-doctor build probe:"

PROGRAMS = {
    "c10": (
        "#include <c10/core/Device.h>\n"
        "#include <iostream>\n"
        "#include <string>\n"
        "int main() {\n"
        '  c10::Device device(std::string("cpu"));  // takes a std::string: fails to link on an ABI mismatch\n'
        f'  std::cout << "{MARK} " << device << std::endl;\n'
        "  return device.is_cpu() ? 0 : 1;\n"
        "}\n"
    ),
    "full": (
        "#include <torch/torch.h>\n"
        "#include <iostream>\n"
        "int main() {\n"
        "  torch::Tensor t = torch::ones({2, 2});\n"
        "  float sum = (t + t).sum().item<float>();\n"
        f'  std::cout << "{MARK} " << sum << std::endl;\n'
        "  return sum == 8.0f ? 0 : 1;\n"
        "}\n"
    ),
}
LIBS = {"c10": ["-lc10"], "full": ["-ltorch", "-ltorch_cpu", "-lc10"]}
COMPILE_TIMEOUT = {"c10": 120.0, "full": 600.0}
RUN_TIMEOUT = 60.0


@record
class BuildResult:
    """What the probe did; `area()` is the line `doctor check --build` shows."""

    mode: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    skipped: bool = False

    def area(self) -> Area:
        return Area("build", f"Build probe ({self.mode})", self.summary, self.details, self.findings)


def build_check(host: Host, install, mode: str = "c10") -> BuildResult:
    """Compile, link and run a probe against `install` (a LibtorchInstall) on this machine.

    Never raises for a broken setup: every failure is a finding (explained like a build log).
    """
    if mode not in PROGRAMS:
        raise ValueError(f"build probe mode must be one of {sorted(PROGRAMS)}, not {mode!r}")
    start = time.monotonic()
    if install is None or not getattr(install, "exists", False):
        return BuildResult(mode, False, "skipped: no active libtorch to build against", skipped=True)
    if host.system == "Windows":
        return BuildResult(mode, False, "skipped: the build probe drives gcc/clang; MSVC is not supported yet", skipped=True)
    bad = _unsplittable(host, ("CXX", "CXXFLAGS", "LDFLAGS"))
    if bad:
        name, why = bad
        finding = Finding(
            "build.failed", Level.ERROR, f"{name} is not valid shell words ({why}): no build can use it",
            detail=f"{name}={host.env[name][:200]!r}. make and CMake split it like a shell and fail the same way.",
            fix=f"fix the quotes in {name}, or unset it", area="build", evidence=[Evidence("env", name, host.env[name][:300])],
        )
        return BuildResult(mode, False, f"{name} cannot be split into words", findings=[finding], seconds=time.monotonic() - start)
    cxx = _compiler(host)
    if cxx is None and host.env.get("CXX"):
        finding = Finding(
            "toolchain.compiler-missing", Level.ERROR, "$CXX names a compiler that is not found: the build probe, "
            "like make and CMake, compiles with $CXX",
            fix=fixes.cxx_not_found(), area="build", evidence=[Evidence("env", "CXX", host.env["CXX"])],
        )
        return BuildResult(mode, False, "no C++ compiler", findings=[finding], seconds=time.monotonic() - start)
    if cxx is None:
        finding = Finding(
            "toolchain.compiler-missing", Level.ERROR, "no C++ compiler found for the build probe",
            detail="Neither c++, g++ nor clang++ is on PATH.",
            fix="sudo apt-get install g++ (Fedora: dnf install gcc-c++; macOS: xcode-select --install)",
            area="build", evidence=[Evidence("env", "CXX", "(unset)")],
        )
        return BuildResult(mode, False, "no C++ compiler", findings=[finding], seconds=time.monotonic() - start)

    env, flags, emitted = _emitted(host, install)
    cxxflags = shlex.split(host.env.get("CXXFLAGS", ""))
    ldflags = shlex.split(host.env.get("LDFLAGS", ""))
    std = f"-std=c++{install.cxx_standard or 17}"
    libs = list(LIBS[mode])
    if mode == "full" and any("torch_cuda" in lib for lib in install.libraries):
        libs = ["-Wl,--no-as-needed", "-ltorch_cuda", "-Wl,--as-needed", *libs]

    with host.temp_dir("torch-doctor-probe-") as tmp:  # writes go through the Host door
        host.create_new(tmp / "probe.cpp", PROGRAMS[mode])
        # What the compiler sees: the real paths of the Host's files.
        source, exe = host.real(tmp / "probe.cpp"), host.real(tmp / "probe")
        # The user's CXXFLAGS come after ours, so theirs win, as in their own build.
        argv = [*cxx, std, *flags, *cxxflags, str(source), "-o", str(exe), *ldflags, *libs]
        details = [f"compile: {shlex.join(argv)}", *(f"with {line}" for line in emitted)]
        compiled = host.run(argv, timeout=COMPILE_TIMEOUT[mode], env=env)
        if not compiled.ok:
            findings = _explain(host, install, compiled, "compile", argv)
            return BuildResult(mode, False, f"the {mode} probe does not compile or link against libtorch {install.label}",
                               details + _tail(compiled), findings, time.monotonic() - start)
        if host.noexec(tmp):
            finding = Finding(
                "build.failed", Level.WARNING,
                f"the {mode} probe built, but cannot run where it was built: {tmp.parent} is mounted noexec",
                detail=f"The probe is built in a temporary folder under $TMPDIR ({tmp.parent}); that file system forbids "
                "running programs, so the run step says nothing about libtorch.",
                fix=fixes.exec_tmpdir(), area="build",
                evidence=[Evidence("file", str(tmp.parent), "mounted noexec")])
            return BuildResult(mode, False, f"the {mode} probe compiled and linked against libtorch {install.label}; "
                               "its run was skipped (noexec temporary folder)", details, [finding],
                               time.monotonic() - start, skipped=True)
        ran = host.run([str(exe)], timeout=RUN_TIMEOUT, env=env)
        details.append(f"run: {exe.name} → {(ran.stdout or ran.stderr).strip()[:200]}")
        if not ran.ok or MARK not in ran.stdout:
            findings = _explain(host, install, ran, "run", [str(exe)])
            return BuildResult(mode, False, f"the {mode} probe builds but does not run against libtorch {install.label}",
                               details + _tail(ran), findings, time.monotonic() - start)
    seconds = time.monotonic() - start
    what = "a c10 program" if mode == "c10" else "a <torch/torch.h> program with a tensor op"
    return BuildResult(mode, True, f"compiled, linked and ran {what} against libtorch {install.label} in {seconds:.1f} s",
                       details, [], seconds)


def _unsplittable(host: Host, names: tuple[str, ...]) -> tuple[str, str] | None:
    """The first variable whose value shlex cannot split (an unbalanced quote), and why."""
    for name in names:
        try:
            shlex.split(host.env.get(name, ""))
        except ValueError as exc:
            return name, str(exc)
    return None


def _compiler(host: Host) -> list[str] | None:
    if host.env.get("CXX"):
        cxx = shlex.split(host.env["CXX"])
        return cxx if cxx and host.which(cxx[0]) else None
    for name in ("c++", "g++", "clang++"):
        if host.which(name):
            return [name]
    return None


def _emitted(host: Host, install) -> tuple[dict[str, str], list[str], list[str]]:
    """The environment after `eval "$(doctor emit setenv)"`, and the compiler flags the CMake emitter sets."""
    from doctor.emit.variables import apply, variables

    vars = variables(install, host.system)
    env = apply(vars, host.env, host.system)
    flags = [f"-D_GLIBCXX_USE_CXX11_ABI={v.value}" for v in vars if v.name == "LIBTORCH_CXX11_ABI"]
    shown = [f"{v.name}={env[v.name]}" for v in vars if v.name in ("CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")]
    return env, flags, shown


def _explain(host: Host, install, result: RunResult, step: str, argv: list[str]) -> list[Finding]:
    from doctor.explain_machine import explain_on, machine_facts

    # The command line leads the text, as make would echo it, so its -D flags count as context.
    text = f"{shlex.join(argv)}\n{result.stdout}\n{result.stderr}"
    findings = explain_on(host, text, machine_facts(host, install), source=f"build probe {step} output")
    for f in findings:
        f.area = "build"
        f.evidence.insert(0, Evidence("command", shlex.join(argv), f"exit {result.returncode}"))
    if findings:
        return findings
    reason = result.error or f"exit {result.returncode}"
    return [Finding(
        "build.failed", Level.ERROR, f"the build probe's {step} step failed ({reason}) for a reason the doctor does not recognise",
        detail="\n".join(_tail(result, 15)),
        fix=f"run it yourself and read the first error: {shlex.join(argv)}\n"
            "(if it is a setup problem the doctor should know, please report it with this output)",
        area="build", evidence=[Evidence("command", shlex.join(argv), (result.stderr or result.stdout)[-300:])],
    )]


def _tail(result: RunResult, n: int = 8) -> list[str]:
    lines = [l for l in (result.stderr + "\n" + result.stdout).splitlines() if l.strip()]
    if result.error:
        lines.append(result.error)
    return [f"| {l[:300]}" for l in lines[-n:]]
