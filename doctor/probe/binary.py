"""`doctor check --binary`: what a built program, extension module or shared library needs,
and what the loader would give it. Facts only; diagnose/binary.py judges them.

Read with probe/elf.py's reader: NEEDED/RUNPATH/RPATH, version needs (GLIBCXX_3.4.30 …), its undefined
dynamic symbols; then each NEEDED entry is resolved in glibc's order (probe/loader.py) and,
breadth first as ld.so does, their own NEEDED entries, to learn which symbols the whole load
set defines.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import PurePath

from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.elf import CXX11_STRING, OLD_STRING, TORCH_NAMESPACES, ElfProblem, abi_from_counts, read_elf
from doctor.probe.loader import Resolution, resolve_needed
from doctor.record import record

MAX_LOAD_SET = 96  # a libtorch program loads ~30 objects; bound hostile or looping trees
TORCH_LIBS = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libc10_cuda.so",
              "libtorch_hip.so", "libtorch_python.so")


@record
class BinaryFacts:
    """A built program or library as the loader would treat it: NEEDED, ABI, symbols."""
    path: str
    readable: bool
    error: str = ""
    machine: str | None = None
    needed: list[Resolution] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    load_set: list[str] = field(default_factory=list)  # every object the loader maps, breadth first
    torch_lib_dir: str | None = None  # where its libtorch libraries resolve
    torch_cuda_beside: bool = False  # that directory holds libtorch_cuda.so (a CUDA libtorch)
    undefined_torch_cxx11: int = 0  # undefined c10/at/torch symbols taking std::__cxx11::string
    undefined_torch_old: int = 0  # ... taking the pre-C++11 std::string (`Ss`)
    torch_abi_loaded: str | None = None  # ABI of the libc10/libtorch_cpu the loader picks
    version_needs: dict[str, list[str]] = field(default_factory=dict)
    libstdcxx: str | None = None  # the libstdc++.so.6 the loader picks
    libstdcxx_versions: list[str] = field(default_factory=list)  # GLIBCXX_*/CXXABI_* it defines
    unresolved_symbols: list[str] = field(default_factory=list)  # first few, sorted
    unresolved_count: int = 0
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def program_abi(self) -> str | None:
        return abi_from_counts(self.undefined_torch_cxx11, self.undefined_torch_old)


def read_symbols(real_path: str) -> tuple[list[tuple[str, bool]], set[str], list[str]]:
    """(undefined (name, weak) pairs, defined names, version definitions) of the dynamic table."""
    from doctor.probe.elf import ElfReader

    undefined: list[tuple[str, bool]] = []
    defined: set[str] = set()
    with open(real_path, "rb") as fh:
        elf = ElfReader(fh)
        for name, is_defined, weak in elf.symbols():
            if is_defined:
                defined.add(name)
            else:
                undefined.append((name, weak))
        verdefs = elf.version_definitions()
    return undefined, defined, verdefs


def read_version_definitions(real_path: str) -> list[str]:
    """The version definitions (GLIBCXX_3.4.30, …) alone: libstdc++'s ~6,000 symbols are not read."""
    from doctor.probe.elf import ElfReader

    with open(real_path, "rb") as fh:
        return ElfReader(fh).version_definitions()


def inspect_binary(host: Host, path: str, ld_cache: dict[str, list[str]]) -> BinaryFacts:
    facts = BinaryFacts(path, readable=False)
    if not host.is_file(path):
        facts.error = "no such file"
        return facts
    try:
        facts.needed, elf = resolve_needed(host, PurePath(path), ld_cache)
        undefined, _own, _ = read_symbols(str(host.real(path)))
    except Exception as exc:  # not an ELF file, truncated, hostile
        reraise_out_of_resources(exc)
        said = str(exc) if isinstance(exc, (ElfProblem, OSError)) else f"{type(exc).__name__}: {exc}"  # ours say it in words
        facts.error = f"not a readable ELF file: {said}"[:300]
        return facts
    facts.readable = True
    facts.machine = elf.machine
    facts.runpath, facts.rpath = list(elf.runpath), list(elf.rpath)
    facts.version_needs = dict(elf.version_needs)
    facts.evidence.append(Evidence("elf", path, f"NEEDED {', '.join(elf.needed) or '-'}; RUNPATH "
                                   f"{':'.join(elf.runpath) or '-'}; RPATH {':'.join(elf.rpath) or '-'}"))
    for name, _weak in undefined:
        if name.startswith(TORCH_NAMESPACES):
            if CXX11_STRING in name:
                facts.undefined_torch_cxx11 += 1
            elif OLD_STRING in name:
                facts.undefined_torch_old += 1
    for res in facts.needed:
        if res.path and res.name.startswith(TORCH_LIBS) and facts.torch_lib_dir is None:
            facts.torch_lib_dir = str(PurePath(res.path).parent)
    if facts.torch_lib_dir:
        facts.torch_cuda_beside = host.exists(PurePath(facts.torch_lib_dir) / "libtorch_cuda.so")
    defined = _load_set(host, facts, ld_cache)
    missing = sorted({n for n, weak in undefined if not weak and n not in defined})
    facts.unresolved_count = len(missing)
    facts.unresolved_symbols = missing[:20]
    return facts


def _load_set(host: Host, facts: BinaryFacts, ld_cache: dict[str, list[str]]) -> set[str]:
    """Breadth first over resolved NEEDED entries, as ld.so maps them; the defined symbols of all."""
    defined: set[str] = set()
    queue = [r.path for r in facts.needed if r.path]
    seen: set[str] = set()
    while queue and len(seen) < MAX_LOAD_SET:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        facts.load_set.append(path)
        try:
            _undef, names, verdefs = read_symbols(str(host.real(path)))
            deps, _ = resolve_needed(host, PurePath(path), ld_cache)
        except Exception as exc:
            reraise_out_of_resources(exc)
            facts.evidence.append(Evidence("elf", path, f"unreadable: {exc}"[:200]))
            continue
        defined |= names
        name = PurePath(path).name
        if name.startswith("libstdc++.so") and facts.libstdcxx is None:
            facts.libstdcxx = path
            facts.libstdcxx_versions = sorted({v for v in verdefs if v.startswith(("GLIBCXX_", "CXXABI_"))})
            facts.evidence.append(Evidence("elf", path, f"defines {', '.join(facts.libstdcxx_versions[-3:])}"))
        if name in ("libc10.so", "libtorch_cpu.so") and facts.torch_abi_loaded is None:
            try:
                info = read_elf(path, str(host.real(path)), count_abi_symbols=True)
                facts.torch_abi_loaded = abi_from_counts(info.cxx11_symbols or 0, info.old_abi_symbols or 0)
                facts.evidence.append(Evidence("elf", path, f"{info.cxx11_symbols} std::__cxx11::string symbols, "
                                               f"{info.old_abi_symbols} old-ABI std::string symbols"))
            except Exception as exc:
                reraise_out_of_resources(exc)
        queue.extend(d.path for d in deps if d.path and d.path not in seen)
    return defined
