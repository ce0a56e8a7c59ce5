"""The libstdc++ the active libtorch actually gets, and the GLIBCXX/CXXABI versions it needs.

The system probe reads the ld.so.cache copy; a process may get another one first:
LD_LIBRARY_PATH (conda users often put $CONDA_PREFIX/lib there), libtorch's own RUNPATH, or,
for a conda interpreter, the environment's lib/ (its python carries RPATH $ORIGIN/../lib).
"""

from __future__ import annotations

from dataclasses import field
from pathlib import PurePath

from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.binary import read_version_definitions
from doctor.probe.elf import read_elf
from doctor.probe.loader import resolve_needed
from doctor.record import record

LIBS = ("libtorch_cpu.so", "libc10.so")


@record
class LibstdcxxFacts:
    """The libstdc++ the loader gives libtorch, and the GLIBCXX versions it defines."""
    path: str | None  # what the loader gives libtorch
    via: str
    versions: list[str] = field(default_factory=list)  # GLIBCXX_*/CXXABI_* it defines
    needs: dict[str, list[str]] = field(default_factory=dict)  # libtorch library → versions it needs
    evidence: list[Evidence] = field(default_factory=list)


def detect_libstdcxx(host: Host, lib_dir: str | None, ld_cache: dict[str, list[str]],
                     python: str | None = None) -> LibstdcxxFacts | None:
    if lib_dir is None or host.system != "Linux":
        return None
    facts = LibstdcxxFacts(None, "")
    for name in LIBS:
        path = PurePath(lib_dir) / name
        if not host.exists(path):
            continue
        try:
            info = read_elf(str(path), str(host.real(path)))
            resolved, _ = resolve_needed(host, path, ld_cache, prefixes=("libstdc++.so",))
        except Exception as exc:
            reraise_out_of_resources(exc)
            facts.evidence.append(Evidence("elf", str(path), f"unreadable: {exc}"[:200]))
            continue
        wanted = info.version_needs.get("libstdc++.so.6", [])
        if wanted:
            facts.needs[name] = wanted
            facts.evidence.append(Evidence("elf", str(path), "needs " + ", ".join(sorted(wanted)[-3:])))
        if facts.path is None and resolved:
            facts.path, facts.via = resolved[0].path, resolved[0].via
    prefix = host.env.get("CONDA_PREFIX")
    conda_copy = PurePath(prefix) / "lib" / "libstdc++.so.6" if prefix else None
    if (conda_copy and python and python.startswith(prefix.rstrip("/") + "/") and host.exists(conda_copy)
            and facts.via not in ("LD_LIBRARY_PATH", "RPATH")):
        # The conda python loads its environment's libstdc++ first; libtorch's lookup then finds it loaded.
        facts.path, facts.via = str(conda_copy), "conda python's RPATH ($ORIGIN/../lib)"
    if facts.path:
        try:
            verdefs = read_version_definitions(str(host.real(facts.path)))
            facts.versions = sorted({v for v in verdefs if v.startswith(("GLIBCXX_", "CXXABI_"))})
            facts.evidence.append(Evidence("elf", facts.path, f"via {facts.via}; defines up to "
                                           + ", ".join(v for v in facts.versions[-2:])))
        except Exception as exc:
            reraise_out_of_resources(exc)
            facts.evidence.append(Evidence("elf", facts.path, f"unreadable: {exc}"[:200]))
    return facts
