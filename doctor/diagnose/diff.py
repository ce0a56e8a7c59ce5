"""What differs between two `doctor check --json` reports (pure functions of their dicts).

For "works on my machine, fails in CI": A is the machine that works, B the one that does not.
A difference in a fact a requirement can name (libtorch/torch version, variant, ABI, GPU
driver, GPUs) is an error; toolchain, loader, environment and platform differences are
warnings; machine trivia is info (shown with -v).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from doctor import __version__
from doctor.errors import UsageError
from doctor.model import Area, Evidence, Finding, Level, Report
from doctor.record import record


@record(frozen=True)
class Fact:
    area: str
    label: str  # what it is, as the user reads it: "libtorch ABI"
    path: str  # where it is in the JSON, for the evidence: "facts.libtorch.candidates[0].abi"
    value: str  # "none" when absent
    level: Level  # what a difference means
    fix: str = ""
    brief: bool = False  # shown in the area's one-line summary when both sides agree

    @property
    def summary(self) -> str:
        return self.value if self.area in ("libtorch", "torch") else f"{self.label} {self.value}"


AREAS = {
    "libtorch": "libtorch (active)",
    "torch": "Python torch",
    "gpu": "GPU",
    "toolchain": "Toolchain",
    "loader": "Loader",
    "system": "System",
    "env": "Environment",
    "results": "Check results",
}
NONE = "none"


def show(value: Any) -> str:
    if value is None or value == [] or value == "":
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(show(v) for v in value)
    return str(value)


def _get(data: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and type(key) is int and 0 <= key < len(data):  # not -1, not True
            data = data[key]
        else:
            return None
    return data


# -- the facts of one report, area by area --


def libtorch_facts(facts: dict) -> Iterator[Fact]:
    lt = facts.get("libtorch") or {}
    index = lt.get("active")
    active = _get(lt, "candidates", index) if isinstance(index, int) else None
    base = f"facts.libtorch.candidates[{index}]"
    fetch = "make B use the libtorch A uses: doctor fetch-libtorch --version {version} --variant {variant}"
    yield Fact("libtorch", "libtorch version", f"{base}.version", show(_get(active, "version")), Level.ERROR, fetch, True)
    yield Fact("libtorch", "libtorch variant", f"{base}.variant", show(_get(active, "variant")), Level.ERROR, fetch, True)
    yield Fact("libtorch", "libtorch CXX11 ABI", f"{base}.abi", show(_get(active, "abi")), Level.ERROR,
               "build and run with one ABI: doctor fetch-libtorch --version {version} --variant {variant} --abi {abi}", True)
    yield Fact("libtorch", "libtorch C++ standard", f"{base}.cxx_standard", show(_get(active, "cxx_standard")), Level.WARNING)
    yield Fact("libtorch", "libtorch CPU architecture", f"{base}.elf_machine", show(_get(active, "elf_machine")), Level.WARNING)
    yield Fact("libtorch", "libtorch location", f"{base}.root", show(_get(active, "root")), Level.INFO)
    yield Fact("libtorch", "libtorch found via", f"{base}.origins", show(_get(active, "origins")), Level.INFO)
    yield Fact("libtorch", "libtorch candidates", "facts.libtorch.candidates",
               str(len(lt.get("candidates") or [])), Level.INFO)


def torch_facts(facts: dict) -> Iterator[Fact]:
    torch = facts.get("python_torch")
    pip = "make B use the torch A uses: pip install 'torch=={torch}'"
    yield Fact("torch", "torch version", "facts.python_torch.version", show(_get(torch, "version")), Level.ERROR, pip, True)
    yield Fact("torch", "torch CUDA", "facts.python_torch.cuda", show(_get(torch, "cuda")), Level.ERROR, pip)
    yield Fact("torch", "torch HIP", "facts.python_torch.hip", show(_get(torch, "hip")), Level.ERROR, pip)
    yield Fact("torch", "Python", "facts.python_torch.python", show(_get(torch, "python")), Level.INFO)


def gpu_facts(facts: dict) -> Iterator[Fact]:
    gpu = facts.get("gpu") or {}
    nvidia, amd, apple = gpu.get("nvidia") or {}, gpu.get("amd") or {}, gpu.get("apple") or {}
    driver_fix = "install on B the driver A has (`doctor check -v` on B shows what its GPUs and builds need)"
    yield Fact("gpu", "NVIDIA driver", "facts.gpu.nvidia.driver_version", show(nvidia.get("driver_version")),
               Level.ERROR, driver_fix, True)
    yield Fact("gpu", "CUDA the driver supports", "facts.gpu.nvidia.driver_cuda_version",
               show(nvidia.get("driver_cuda_version")), Level.ERROR, driver_fix)
    yield Fact("gpu", "NVIDIA driver answers", "facts.gpu.nvidia.reachable",
               show(bool(nvidia.get("reachable"))), Level.ERROR,
               "on B: load the driver, pass the GPUs into the container (--gpus all), check CUDA_VISIBLE_DEVICES")
    names = [f"{g.get('name') or '?'} (sm {g.get('compute_capability') or '?'})"
             for g in nvidia.get("gpus") or [] if isinstance(g, dict) and g.get("visible", True)]
    yield Fact("gpu", "NVIDIA GPUs", "facts.gpu.nvidia.gpus", show(names), Level.ERROR,
               "run B where A's GPUs are visible (containers: --gpus all; check CUDA_VISIBLE_DEVICES)", True)
    gfx = [str(g.get("gfx")) for g in amd.get("gpus") or [] if isinstance(g, dict)]
    yield Fact("gpu", "AMD GPUs", "facts.gpu.amd.gpus", show(gfx), Level.ERROR, brief=True)
    yield Fact("gpu", "AMD GPUs usable", "facts.gpu.amd.usable", show(bool(amd.get("usable"))), Level.ERROR)
    yield Fact("gpu", "ROCm", "facts.gpu.amd.rocm_version", show(amd.get("rocm_version")), Level.WARNING)
    yield Fact("gpu", "Apple MPS", "facts.gpu.apple.mps_eligible", show(apple.get("mps_eligible")), Level.ERROR)
    yield Fact("gpu", "variant that fits", "facts.gpu.recommended.variant",
               show(_get(gpu, "recommended", "variant")), Level.WARNING)


def toolchain_facts(facts: dict) -> Iterator[Fact]:
    tc = facts.get("toolchain") or {}
    for i, compiler in enumerate(tc.get("compilers") or []):
        std = compiler.get("max_std")
        value = show(compiler.get("version")) + (f" (up to c++{std})" if std else "")
        yield Fact("toolchain", show(compiler.get("name")), f"facts.toolchain.compilers[{i}]", value, Level.WARNING,
                   brief=True)
    for tool in ("cmake", "nvcc"):
        yield Fact("toolchain", tool, f"facts.toolchain.{tool}.version", show(_get(tc, tool, "version")),
                   Level.WARNING, brief=True)
    flags = [f"{var}: -D_GLIBCXX_USE_CXX11_ABI={value}" for var, value in tc.get("abi_flags") or []]
    yield Fact("toolchain", "ABI flags", "facts.toolchain.abi_flags", show(flags), Level.WARNING)
    flags = [f"{var}: -std=c++{value}" for var, value in tc.get("std_flags") or []]
    yield Fact("toolchain", "-std flags", "facts.toolchain.std_flags", show(flags), Level.WARNING)


def loader_facts(facts: dict) -> Iterator[Fact]:
    loader = facts.get("loader") or {}
    yield Fact("loader", "libraries the loader cannot find", "facts.loader.unresolved",
               show(loader.get("unresolved")), Level.WARNING)


def system_facts(facts: dict) -> Iterator[Fact]:
    system = facts.get("system") or {}
    for key, label, level in (
        ("os", "OS", Level.WARNING),
        ("machine", "CPU architecture", Level.WARNING),
        ("glibc", "glibc", Level.WARNING),
        ("glibcxx_max", "newest GLIBCXX", Level.WARNING),
        ("cxxabi_max", "newest CXXABI", Level.WARNING),
        ("distribution", "distribution", Level.INFO),
        ("kernel", "kernel", Level.INFO),
        ("cpu_model", "CPU model", Level.INFO),
        ("logical_cores", "logical cores", Level.INFO),
        ("simd", "SIMD", Level.INFO),
    ):
        yield Fact("system", label, f"facts.system.{key}", show(system.get(key)), level,
                   brief=key in ("distribution", "machine", "glibc"))


def env_facts(facts: dict) -> Iterator[Fact]:
    # A variable set on one side only is compared with "none" on the other (see `compare`).
    env = facts.get("env") or {}
    for name in sorted(env):
        yield Fact("env", name, f"facts.env.{name}", show(env[name]), Level.WARNING)


PRODUCERS = (libtorch_facts, torch_facts, gpu_facts, toolchain_facts, loader_facts, system_facts, env_facts)


def collect(facts: dict) -> dict[tuple[str, str], Fact]:
    """The comparable facts of one report, keyed by (area, label)."""
    return {(fact.area, fact.label): fact for produce in PRODUCERS for fact in produce(facts)}


# -- comparing --


@record(frozen=True)
class Input:
    name: str  # as given on the command line
    data: dict


def compare(a: Input, b: Input) -> Report:
    """A `diff` report: one finding per fact whose value differs, plus problems only one side has."""
    left, right = _collect(a), _collect(b)
    findings: dict[str, list[Finding]] = {area: [] for area in AREAS}
    differences = []
    for key in left | right:  # A's facts in A's order, then those only B has
        fact = left.get(key) or right[key]
        va, vb = (side[key].value if key in side else NONE for side in (left, right))
        if va == vb:
            continue
        differences.append({"area": fact.area, "fact": fact.label, "a": va, "b": vb, "level": fact.level.value})
        findings[fact.area].append(_finding(fact, va, vb, a, b))
    findings["results"] = _result_changes(a, b)
    areas = []
    for name, title in AREAS.items():
        same = [f.summary for f in left.values() if f.area == name and f.brief and f.value != NONE]
        areas.append(Area(name, title, _summary(findings[name], same), findings=findings[name]))
    return Report(
        "diff",
        {
            "a": {"file": a.name, "doctor_version": a.data.get("doctor_version"), "exit_code": a.data.get("exit_code")},
            "b": {"file": b.name, "doctor_version": b.data.get("doctor_version"), "exit_code": b.data.get("exit_code")},
            "differences": differences,
        },
        areas,
        doctor_version=__version__,
    )


def _collect(report: Input) -> dict[tuple[str, str], Fact]:
    facts = report.data.get("facts")
    shape = "not in the shape `doctor check --json` writes"
    if not isinstance(facts, dict):
        raise UsageError(f"{report.name}: its facts are {_kind(facts)}, {shape}")
    for key in SECTIONS:  # hand-edited or from another tool: name the part, not a Python error
        if (value := facts.get(key)) is not None and not isinstance(value, dict):
            raise UsageError(f"{report.name}: facts.{key} is {_kind(value)}, {shape}")
    try:
        return collect(facts)
    except (AttributeError, TypeError, ValueError):
        raise UsageError(f"{report.name}: a value inside its facts is of another kind than {shape}") from None


SECTIONS = ("libtorch", "python_torch", "gpu", "toolchain", "loader", "system", "env")  # the ones compared


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null"}.get(
        type(value), "a number")


def _summary(findings: list[Finding], same: list[str]) -> str:
    if not findings:
        return "same" + (": " + ", ".join(same) if same else "")
    major = sum(f.level is not Level.INFO for f in findings)
    minor = len(findings) - major
    if not major:
        return f"same ({minor} minor difference{'s' * (minor != 1)}, shown with -v)"
    text = f"{major} difference{'s' * (major != 1)}"
    return text + (f" (and {minor} minor, shown with -v)" if minor else "")


def _result_changes(a: Input, b: Input) -> list[Finding]:
    """Problem ids one report has and the other lacks: often the quickest pointer to the cause.
    Compared by id alone: the same problem on two machines names different paths."""

    def problems(data: dict) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for f in data.get("findings") or []:
            if isinstance(f, dict) and f.get("level") in ("warning", "error"):
                out.setdefault(str(f.get("id")), f)
        return out

    pa, pb = problems(a.data), problems(b.data)
    out = []
    for side, mine, theirs, name in (("B", pb, pa, b.name), ("A", pa, pb, a.name)):
        for fid, f in mine.items():
            if fid in theirs:
                continue
            out.append(Finding(
                id="diff.changed",
                level=Level.WARNING,
                title=f"only {side} reports {fid} ({f.get('level')}): {f.get('title')}",
                fix=str(f.get("fix") or ""),
                area="results",
                evidence=[Evidence("file", name, f"findings[id={fid}] level={f.get('level')}")],
                subject=f"{side}:{fid}",
            ))
    return out


def fill_fix(fact: Fact, data: dict) -> str:
    """The fact's fix with the placeholders filled from the report that has the wanted values."""
    if not fact.fix:
        return ""
    facts = data["facts"]
    active = _get(facts, "libtorch", "candidates", _get(facts, "libtorch", "active")) or {}
    torch = facts.get("python_torch") or {}
    return fact.fix.format(version=active.get("version") or "<version>", variant=active.get("variant") or "<variant>",
                           abi=active.get("abi") or "<abi>", torch=torch.get("version") or "<version>")


def _finding(fact: Fact, va: str, vb: str, a: Input, b: Input) -> Finding:
    fix = fill_fix(fact, a.data)  # the fix brings B to what A has, so its placeholders are A's values
    return Finding(
        id="diff.changed",
        level=fact.level,
        title=f"{fact.label}: {va} → {vb}",
        detail=f"A ({a.name}): {va}\nB ({b.name}): {vb}",
        fix=fix,
        area=fact.area,
        evidence=[Evidence("file", a.name, f"{fact.path} = {va}"), Evidence("file", b.name, f"{fact.path} = {vb}")],
        subject=fact.label,
    )


# -- comparing N reports (doctor fleet) --


@record(frozen=True)
class Spread:
    """One fact whose value differs across N reports: each value with the reports that hold it,
    the most common value first (ties: in the order of the reports)."""

    fact: Fact  # as the first report holding it has it (label, level, fix)
    values: tuple[tuple[str, tuple[str, ...]], ...]


def compare_many(inputs: Sequence[Input]) -> list[Spread]:
    """Every fact (and every problem id of the reports' findings) that is not the same in all
    `inputs`; a fact one report lacks counts as "none" there, as in `compare`."""
    sides = [(i.name, _collect(i)) for i in inputs]
    for i, (name, facts) in enumerate(sides):
        for fid in _problems(inputs[i].data):
            facts[("results", fid)] = Fact("results", f"problem {fid}", f"findings[id={fid}]", "reported", Level.WARNING)
    keys: dict[tuple[str, str], Fact] = {}
    for _, facts in sides:
        for key, fact in facts.items():
            keys.setdefault(key, fact)
    out = []
    for key, fact in keys.items():
        holders: dict[str, list[str]] = {}
        for name, facts in sides:
            value = facts[key].value if key in facts else ("not reported" if key[0] == "results" else NONE)
            holders.setdefault(value, []).append(name)
        if len(holders) > 1:
            ranked = sorted(holders.items(), key=lambda kv: -len(kv[1]))  # stable: ties keep report order
            out.append(Spread(fact, tuple((v, tuple(names)) for v, names in ranked)))
    return out


def _problems(data: dict) -> list[str]:
    return sorted({str(f.get("id")) for f in data.get("findings") or []
                   if isinstance(f, dict) and f.get("level") in ("warning", "error")})
