"""The libtorch area: every candidate, the one a build would use, and what is wrong with them."""

from __future__ import annotations

from pathlib import PurePath

from doctor import fixes
from doctor.diagnose.common import newest, not_a_directory
from doctor.fixes import FETCH
from doctor.formats import symbol_version_key as version_key
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.libtorch import LibtorchFacts, LibtorchInstall
from doctor.probe.python_torch import PythonTorch
from doctor.probe.system import SystemFacts
from doctor.quoting import sh_paste

ENV_ORIGINS = {"LIBTORCH": "LIBTORCH", "LIBTORCH_INCLUDE/LIBTORCH_LIB": "LIBTORCH_LIB", "Torch_DIR": "Torch_DIR"}


def describe(c: LibtorchInstall) -> str:
    abi = {"cxx11": "CXX11 ABI", "pre-cxx11": "pre-CXX11 ABI"}.get(c.abi or "", "ABI n/a")
    std = f"C++{c.cxx_standard}" if c.cxx_standard else "C++ ?"
    return f"{c.label}, {abi}, {std} at {c.root} [{', '.join(c.origins)}]"


def libtorch_area(facts: LibtorchFacts, python: PythonTorch | None, system: SystemFacts) -> Area:
    active = facts.active_install
    findings: list[Finding] = []
    details = []
    for i, c in enumerate(facts.candidates):
        mark = "→ " if i == facts.active else "  "
        details.append(f"{mark}{describe(c)}")
        if c.abi:
            details.append(f"    ABI {c.abi} from {c.abi_source}")
        for s in c.version_sources:
            details.append(f"    {s.file}: {s.version}")
        findings.extend(_tree_findings(c, system, active=i == facts.active))
    details.append(f"a build would use: {active.root if active else 'nothing'} ({facts.active_reason})")
    details.append("search order: " + ", ".join(facts.searched))
    findings.extend(_conflicts(facts, python))
    if active is None:
        findings.append(
            Finding(
                "libtorch.not-found",
                Level.ERROR,
                "no libtorch found",
                detail="Looked in: " + ", ".join(facts.searched),
                fix=FETCH,
                area="libtorch",
            )
        )
        summary = "none found"
    else:
        summary = f"{describe(active)} — {facts.active_reason}"
    return Area("libtorch", "libtorch", summary, details, findings)


def _denied_finding(c: LibtorchInstall, variable: str | None, active: bool) -> Finding:
    root = PurePath(c.root)
    parts = ["the folder itself" if PurePath(d) == root else _relative(d, root) for d in c.denied]
    return Finding(
        "libtorch.path-invalid",
        Level.ERROR if variable or active else Level.WARNING,
        f"{c.root}: this user may not read {', '.join(parts)} (permission denied)",
        detail=f"The tree is on disk, but its permissions keep this user out: builds against {c.root} find no "
        "headers or libraries, and programs cannot load them. A tree unpacked or copied by root under a "
        "restrictive umask (077) looks like this; it is not damaged.",
        fix=fixes.readable_by_all(c.root),
        area="libtorch",
        evidence=[Evidence("file", d, "permission denied") for d in c.denied[:3]],
        subject=c.root,
    )


def _incomplete(c: LibtorchInstall) -> str:
    """What a tree lacks: "(no include/torch, lib/libc10.so is a symbolic link to a path that does
    not exist)", a tree of links into a store that was cleaned."""
    parts = [f"no {rel}" if kind == "missing" else f"{rel} {not_a_directory(kind)}"
             for path, kind in c.missing.items() for rel in [_relative(path, PurePath(c.root))]]
    return f"is not a complete libtorch ({', '.join(parts) or 'no include/torch or lib/libc10'})"


def _relative(path: str, root: PurePath) -> str:
    try:
        return str(PurePath(path).relative_to(root))
    except ValueError:  # LIBTORCH_INCLUDE / LIBTORCH_LIB outside the root
        return path


def _tree_findings(c: LibtorchInstall, system: SystemFacts, active: bool = True) -> list[Finding]:
    out = []
    variable = next((ENV_ORIGINS[o] for o in c.origins if o in ENV_ORIGINS), None)
    if c.exists and c.denied:
        return [_denied_finding(c, variable, active)]
    if c.noexec:
        out.append(Finding(
            "libtorch.path-invalid",
            Level.ERROR if variable or active else Level.WARNING,
            f"{c.lib_dir} is on a file system mounted noexec: no program can load libtorch from there",
            detail="The loader maps shared libraries executable; on a noexec mount that fails, and a program "
            "built against this tree stops with 'libc10.so: failed to map segment from shared object'.",
            fix=fixes.exec_mount(c.lib_dir),
            area="libtorch",
            evidence=[Evidence("file", c.lib_dir, "mounted noexec")],
            subject=f"{c.root}:noexec",
        ))
    if not c.exists or not c.complete:
        if "LIBTORCH_INCLUDE/LIBTORCH_LIB" in c.origins and len(c.origins) == 1:
            return out  # diagnose/clients.py names the variable that is wrong (issue 18)
        what = not_a_directory(c.root_kind) if not c.exists else _incomplete(c)
        if c.unexpanded_tilde:
            what += ": its ~ was not expanded"
        if c.nearby_root:
            what += f"; the libtorch root is {c.nearby_root}"
        shown = sh_paste(c.root) if c.root != c.root.strip() else c.root  # quotes make a blank at either end visible
        named_by = f"{variable}={shown}" if variable else shown
        value = next((e.excerpt for e in c.evidence if e.kind == "env" and e.source == variable), "")
        if value.strip() and not PurePath(value).is_absolute():  # LIBTORCH=libtorch: the value, and the folder it names here
            named_by = f"{variable}={sh_paste(value)} ({shown})"
        if variable and c.nearby_root:
            fix = f"export {variable}={sh_paste(c.nearby_root)}"
        elif variable:
            fix = f"unset {variable}, or point it at a libtorch root (the folder with lib/ and include/); or get one: {FETCH}"
        else:
            fix = f"remove {sh_paste(str(c.root))} or re-install it: {FETCH}"
        detail = f"{variable} points a build at {c.root}, which {what}." if variable else f"{c.root} {what}."
        if c.unexpanded_tilde:
            detail += (f" {fixes.TILDE_RULE[0].upper()}{fixes.TILDE_RULE[1:]}: Cargo's [env], a Dockerfile ENV, "
                       "GitHub Actions' env: and systemd never expand it, and tch-rs and Hasktorch then take ~ as a "
                       f"folder name (CMake alone expands it itself). Expanded, it would be {c.unexpanded_tilde}.")
        out.append(
            Finding(
                "libtorch.path-invalid",
                Level.ERROR if variable else Level.WARNING,
                f"{named_by} {what}",
                detail=detail,
                fix=fix,
                area="libtorch",
                evidence=c.evidence[:1],
                subject=c.root,
            )
        )
        return out
    for bad in c.bad_versions:
        out.append(
            Finding(
                "probe.failed",
                Level.WARNING,
                f"could not read the libtorch version from {bad.path}: {bad.version!r} is not a version",
                detail="torch-doctor reads the version from build-version, version.h and TorchConfigVersion.cmake; "
                "this one holds no PEP 440 version, so it was ignored. A hand-edited or damaged file.",
                fix=f"compare with another release's {bad.file}, or re-install: {FETCH}",
                area="libtorch",
                evidence=[Evidence("file", bad.path, bad.version)],
                subject=f"{c.root}:{bad.file}",
            )
        )
    numbers = {s.version.split("+")[0] for s in c.version_sources}
    if len(numbers) > 1:
        out.append(
            Finding(
                "libtorch.version-disagree",
                Level.WARNING,
                f"version files disagree in {c.root}: {', '.join(sorted(numbers))}",
                detail="\n".join(f"{s.path}: {s.version}" for s in c.version_sources)
                + "\nA tree assembled from two releases (an upgrade copied over an old one) links or loads unpredictably.",
                fix=f"remove {sh_paste(str(c.root))} and install one release cleanly: {FETCH}",
                area="libtorch",
                evidence=[Evidence("file", s.path, s.version) for s in c.version_sources],
                subject=c.root,
            )
        )
    for name, reason in c.broken_libraries.items():
        out.append(
            Finding(
                "libtorch.path-invalid",
                Level.ERROR if active else Level.WARNING,
                f"{c.lib_dir}/{name} is not a usable library: {reason}",
                detail=f"A build against {c.root} fails to link, and a program fails to load it. An interrupted "
                "download or copy, a disk error, or a placeholder file leaves a library like this.",
                fix=f"remove {c.root} and install it again: {FETCH}",
                area="libtorch",
                evidence=[e for e in c.evidence if e.kind == "elf"][:1],
                subject=f"{c.root}:{name}",
            )
        )
    wrong_layout = _elf_layout_problem(c, system)
    if wrong_layout:
        out.append(
            Finding(
                "arch.mismatch",
                Level.ERROR if active else Level.WARNING,
                f"{c.lib_dir}/libc10.so is {wrong_layout}; this machine ({system.machine}) loads 64-bit little-endian libraries",
                detail="The loader refuses it: 'wrong ELF class' or 'cannot open shared object file: invalid ELF header'.",
                fix="doctor fetch-libtorch (on aarch64 Linux: doctor fetch-libtorch --from-wheel)",
                area="libtorch",
                evidence=[e for e in c.evidence if e.kind == "elf"][:1],
                subject=f"{c.root}:layout",
            )
        )
    elif c.elf_machine and system.machine and _arch(c.elf_machine) != _arch(system.machine):
        out.append(
            Finding(
                "arch.mismatch",
                Level.ERROR,
                f"{c.root} is built for {c.elf_machine}, this machine is {system.machine}",
                fix="doctor fetch-libtorch (on aarch64 Linux: doctor fetch-libtorch --from-wheel)",
                area="libtorch",
                evidence=[e for e in c.evidence if e.kind == "elf"][:1],
                subject=c.root,
            )
        )
    out.extend(_glibc(c, system))
    return out


# Machines whose shared libraries are 64-bit little-endian: any other class or order cannot load.
LITTLE_64 = {"x86_64", "aarch64", "ppc64le", "riscv64"}


def _elf_layout_problem(c: LibtorchInstall, system: SystemFacts) -> str | None:
    if c.elf_class is None or _arch(system.machine or "") not in LITTLE_64:
        return None
    if c.elf_class != 64:
        return f"a {c.elf_class}-bit ELF file (ELFCLASS{c.elf_class})"
    if c.elf_endian != "little":
        return "a big-endian ELF file"
    return None


def _arch(name: str) -> str:
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name.lower(), name.lower())


def _glibc(c: LibtorchInstall, system: SystemFacts) -> list[Finding]:
    out = []
    if system.libc == "musl":
        needs = sorted({n for names in c.glibc_needs.values() for n in names if n.startswith("GLIBC_")}, key=version_key)
        if needs:
            return [Finding(
                "glibc.missing",
                Level.ERROR,
                f"libtorch needs glibc ({needs[-1]}), and this system's C library is musl",
                detail=f"{c.lib_dir}/libc10.so is built for glibc, as every official libtorch and torch wheel is; "
                "musl (Alpine and other musl distributions) cannot load it: programs fail with 'Error relocating' or "
                "'libc.so.6: cannot open shared object file'.",
                fix=fixes.glibc_system(),
                area="libtorch",
                evidence=[e for e in c.evidence if e.kind == "elf"][:1],
                subject=f"{c.root}:libc",
            )]
    have = {"GLIBC": f"GLIBC_{system.glibc}" if system.glibc else None, "GLIBCXX": system.glibcxx_max, "CXXABI": system.cxxabi_max}
    for lib, names in c.glibc_needs.items():
        for prefix in ("GLIBC", "GLIBCXX", "CXXABI"):
            need = newest(names, prefix)
            if need and have[prefix] and version_key(need) > version_key(have[prefix]):
                out.append(
                    Finding(
                        "glibc.too-old",
                        Level.ERROR,
                        f"libtorch needs {need}, this system provides only {have[prefix]}",
                        detail=f"{c.lib_dir}/libc10.so requires {need} from {lib}.",
                        fix="use a newer distribution or libstdc++ (gcc, or conda's libstdcxx-ng), or an older libtorch",
                        area="libtorch",
                        evidence=[e for e in c.evidence if e.kind == "elf"][:1],
                        subject=f"{c.root}:{need}",
                    )
                )
    return out


def _conflicts(facts: LibtorchFacts, python: PythonTorch | None) -> list[Finding]:
    out = []
    versions = {}
    for c in facts.candidates:
        if c.version and c.complete:
            versions.setdefault(c.label, c)
    if len(versions) > 1:
        out.append(
            Finding(
                "libtorch.conflict",
                Level.WARNING,
                f"{len(versions)} different libtorch versions are reachable: {', '.join(versions)}",
                detail="\n".join(f"{label}: {c.root} [{', '.join(c.origins)}]" for label, c in versions.items())
                + f"\nA build uses the first in search order ({facts.active_reason}); a mix of headers from one"
                " and libraries from another fails to link or crashes.",
                fix="keep one, or make the choice explicit: eval \"$(doctor emit setenv --libtorch <root>)\"",
                area="libtorch",
            )
        )
    active = facts.active_install
    if python and python.base_version and active and active.version and "python" not in active.origins and "LIBTORCH" in active.origins:
        if active.version != python.base_version:
            out.append(
                Finding(
                    "version.mismatch",
                    Level.WARNING,
                    f"Python torch is {python.version} but LIBTORCH is {active.label}",
                    detail="Extensions built against LIBTORCH and imported into this Python, or tch-rs with"
                    " LIBTORCH_USE_PYTORCH, expect one version.",
                    fix=f"doctor fetch-libtorch --version {python.base_version}  (or pip install torch=={active.version})",
                    area="libtorch",
                    evidence=python.evidence + active.evidence[:1],
                )
            )
    return out
