"""The Loader area: at run time, will a program find libtorch and everything libtorch needs?"""

from __future__ import annotations

import re
from pathlib import PurePath

from doctor import fixes
from doctor.formats import clip
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.loader import LoaderFacts


# Libraries whose preloaded copy replaces libtorch's own, or the runtime it was built against.
_TORCH_FAMILY = re.compile(r"lib(?:c10|torch|shm|caffe2)\w*\.so")
_RUNTIMES = re.compile(r"lib(?:stdc\+\+|gomp|iomp5|omp)\w*\.so")


def _every_program(l: LoaderFacts) -> tuple[list[str], list[Finding]]:
    """What the loader does to every program, libtorch or not: an empty LD_LIBRARY_PATH entry
    searches the current folder; LD_PRELOAD's missing entries make ld.so complain in every program,
    a libtorch library preloaded wins over the tree's own, a C++ or OpenMP runtime preloaded is
    said in the details."""
    details = [f"LD_PRELOAD {r.name}" + (": not found" if r.path is None else f" → {r.path}" if r.path != r.name else "")
               for r in l.preload]
    findings = []
    if l.empty_entry:
        findings.append(Finding(
            "loader.empty-entry", Level.WARNING,
            f"{l.variable} has an empty entry (a leading or trailing ':', or '::'): the loader searches the current "
            "folder there",
            detail="ld.so reads an empty entry as the folder a program is started from, so which libraries it loads "
            "depends on where it runs, and a libc10.so lying there is taken first. A script's "
            f"`export {l.variable}=/x:${l.variable}` run while the variable was unset leaves one.",
            fix=fixes.drop_empty_entries(l.variable), area="loader",
            evidence=[e for e in l.evidence if e.kind == "env" and e.source == l.variable][:1], subject=l.variable))
    if l.relative_entries:
        shown = ", ".join(clip(e) for e in l.relative_entries)
        findings.append(Finding(
            "loader.relative-entry", Level.WARNING,
            f"{l.variable} has relative entries ({shown}): the loader looks for them from the folder a program "
            "is started in",
            detail=f"ld.so takes a relative entry of {l.variable} from the current folder: started in the project "
            "folder a program finds its libraries, started from build/, by a test runner or an IDE it stops with "
            "'libc10.so: cannot open shared object file'. "
            f"`export {l.variable}=libtorch/lib:${l.variable}`, as tutorials write it, makes one.",
            fix=fixes.absolute_entries(l.variable, l.relative_entries), area="loader",
            evidence=[e for e in l.evidence if e.kind == "env" and e.source == l.variable][:1], subject=l.variable))
    preloads = {
        "LD_PRELOAD names libraries the loader cannot find": (
            [r.name for r in l.preload if r.path is None],
            "ld.so skips them, printing \"object … from LD_PRELOAD cannot be preloaded\" in every program it starts; "
            "what they were meant to change (an allocator, an OpenMP runtime) does not happen."),
        "LD_PRELOAD loads libtorch libraries into every program": (
            [r.path for r in l.preload if r.path and _TORCH_FAMILY.search(PurePath(r.path).name)],
            "A preloaded library comes before every other: a program built against another libtorch tree gets these "
            "instead of its own, and mixes two releases."),
    }
    evidence = [Evidence("env", "LD_PRELOAD", " ".join(r.name for r in l.preload))]
    for title, (names, detail) in preloads.items():
        if names:
            findings.append(Finding("loader.preload", Level.WARNING, f"{title}: {', '.join(names)}", detail=detail,
                                    fix=fixes.preload_without(), area="loader", evidence=evidence, subject="LD_PRELOAD"))
    runtimes = [r.path for r in l.preload if r.path and _RUNTIMES.search(PurePath(r.path).name)]
    if runtimes:
        details.append(f"LD_PRELOAD puts {', '.join(runtimes)} before libtorch's own C++/OpenMP runtime: an older "
                       "libstdc++ there fails with \"GLIBCXX_… not found\", a second OpenMP runtime with OMP Error #15")
    return details, findings


def loader_area(l: LoaderFacts) -> Area:
    every_details, every_findings = _every_program(l)
    if l.lib_dir is None:
        return Area("loader", "Loader", "no active libtorch to check", every_details, every_findings)
    if l.foreign:
        name = {"Darwin": "macOS", "Windows": "Windows"}.get(l.foreign, l.foreign)
        return Area("loader", "Loader", f"a {name} tree: its loader is simulated in the Platform area")
    details = list(every_details)
    for view in l.libraries:
        r = view.for_programs
        details.append(f"{view.library}: {'via ' + r.via + ' → ' + r.path if r.path else 'not found by the loader'}")
        for n in view.needed:
            details.append(f"    needs {n.name}: {n.via + ' → ' + n.path if n.path else 'NOT FOUND'}")
    findings = list(every_findings)
    missing = [v.library for v in l.libraries if v.for_programs.path is None]
    if missing:
        findings.append(
            Finding(
                "loader.library-not-found",
                Level.WARNING,
                f"{', '.join(missing)} not on the loader path: programs linked against libtorch will not start",
                detail=f"{l.lib_dir} is neither in {l.variable} nor in the ld.so cache; a program built with -ltorch "
                f"and no rpath fails with '{missing[0]}: cannot open shared object file'.",
                fix=fixes.run_time_path(l.lib_dir, variable=l.variable),
                area="loader",
                evidence=[Evidence("env", l.variable, ":".join(l.search_path) or "(unset)")],
                subject=l.lib_dir,
            )
        )
    if l.elsewhere:
        names = ", ".join(r.name for r in l.elsewhere)
        first = l.elsewhere[0]
        findings.append(
            Finding(
                "loader.other-libtorch",
                Level.WARNING,
                f"programs get {names} from {PurePath(first.path).parent} ({first.via}), not from the active libtorch",
                detail=f"A program linked against {l.lib_dir} with no rpath loads "
                + "; ".join(f"{r.path} (via {r.via})" for r in l.elsewhere)
                + ": another libtorch's copy, or a broken one. It then runs another release than it was built "
                "against (undefined symbols at start, or crashes), or does not start at all.",
                fix=fixes.run_time_path(l.lib_dir, variable=l.variable),
                area="loader",
                evidence=[Evidence("env", l.variable, ":".join(l.search_path) or "(unset)")],
                subject=l.lib_dir,
            )
        )
    if l.unresolved:
        findings.append(
            Finding(
                "loader.library-not-found",
                Level.ERROR,
                f"libraries libtorch needs resolve nowhere: {', '.join(l.unresolved)}",
                detail="Neither RUNPATH, " + l.variable + ", the ld.so cache nor the default directories hold them.",
                fix="install the missing libraries (CUDA builds: the matching CUDA runtime, or nvidia-* wheels) "
                f"and add their folder to {l.variable}",
                area="loader",
                evidence=[e for e in l.evidence if e.kind == "elf"],
                subject="needed",
            )
        )
    # libc10 and the libraries this user may not read: the libtorch area says it
    others = [u for u in l.unreadable if not u.startswith("libc10.") and u.split(":")[0] not in l.denied]
    if others:
        findings.append(
            Finding(
                "libtorch.path-invalid",
                Level.ERROR,
                f"libtorch libraries that are not usable ELF files: {', '.join(u.split(':')[0] for u in others)}",
                detail="\n".join(f"{l.lib_dir}/{u}" for u in others)
                + "\nA program linked against them fails to load; their own NEEDED libraries are unknown.",
                fix=f"remove the tree and install it again: {fixes.FETCH}",
                area="loader",
                evidence=[e for e in l.evidence if e.kind == "elf" and e.excerpt.startswith("unreadable")],
                subject="unreadable",
            )
        )
    ok = [v for v in l.libraries if v.for_programs.path]
    if not l.libraries:
        summary = f"no libraries in {l.lib_dir}"
    elif missing:
        summary = f"{l.lib_dir} not on {l.variable}; programs need it at run time"
    else:
        summary = f"{', '.join(v.library for v in ok)} found via {ok[0].for_programs.via}"
    if l.unreadable:
        summary += f"; cannot use {', '.join(u.split(':')[0] for u in l.unreadable)}"
    elif not l.unresolved and l.libraries:
        summary += "; all NEEDED libraries resolve"
    return Area("loader", "Loader", summary, details, findings)
