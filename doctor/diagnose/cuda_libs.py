"""The CUDA libraries area: shadowed copies, mixed CUDA majors, versions older than the build needs."""

from __future__ import annotations

from doctor.formats import version_tuple
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.cuda_libs import CudaLib, CudaLibsFacts, Expectation


_key = version_tuple


def older_than(have: str, specifier: str) -> str | None:
    """The pinned version when `have` is older than an `==`/`>=` pin, compared on the components
    `have` has (a cudnn_version.h says 9.1.0, the wheel pins 9.1.0.70)."""
    for clause in specifier.split(","):
        clause = clause.strip()
        for op in ("==", ">="):
            if clause.startswith(op):
                want = clause[len(op):].strip().rstrip("*").rstrip(".")
                a, b = _key(have), _key(want)
                n = min(len(a), len(b))
                if n and a[:n] < b[:n]:
                    return want
    return None


def _expected_for(lib: CudaLib, expected: list[Expectation]) -> Expectation | None:
    from doctor.catalog.toolkit import CUDA_LIBRARIES

    row = next((r for r in CUDA_LIBRARIES if r.key == lib.key), None)
    return next((e for e in expected if row and e.package == row.package), None)


def cuda_libs_area(f: CudaLibsFacts) -> Area | None:
    if not f.libraries and not f.pip_packages:
        return None
    findings: list[Finding] = []
    details = [f"{lib.soname} ({lib.consumer}) → {lib.path or 'NOT FOUND'}"
               + (f" via {lib.via}" if lib.via else "") + (f", {lib.version} ({lib.version_source})" if lib.version else "")
               for lib in f.libraries]
    details += [f"pip: {p.name} {p.version}" for p in f.pip_packages]
    for lib in f.libraries:
        if lib.path is None and lib.consumer != "libtorch_cuda.so":  # libtorch_cuda's own: the Loader area
            findings.append(Finding(
                "loader.library-not-found", Level.ERROR, f"{lib.consumer} needs {lib.soname}, which the loader cannot find",
                fix=f"pip install the package that ships {lib.soname}, or add its directory to LD_LIBRARY_PATH",
                area="cuda-libs", evidence=lib.evidence, subject=lib.soname))
            continue
        shadowed = lib.pip_copy and lib.path and lib.path != lib.pip_copy and lib.via in ("LD_LIBRARY_PATH", "RPATH")
        if shadowed:
            findings.append(Finding(
                "cuda.library-shadowed", Level.WARNING,
                f"{lib.soname} comes from {lib.path} ({lib.via}), not the copy installed for this build at {lib.pip_copy}",
                detail="LD_LIBRARY_PATH is searched before the RUNPATH the torch wheel uses to find its pip "
                       "nvidia-* libraries, so a system or toolkit copy of another version wins.",
                fix=f"remove {lib.path.rsplit('/', 1)[0]} from LD_LIBRARY_PATH (or put "
                    f"{lib.pip_copy.rsplit('/', 1)[0]} before it)",
                area="cuda-libs", evidence=lib.evidence, subject=lib.soname))
        if lib.missing_symbols:
            findings.append(Finding(
                "cuda.library-too-old", Level.ERROR,
                f"{lib.path} ({lib.soname}{', ' + lib.version if lib.version else ''}) lacks "
                f"{len(lib.missing_symbols)} symbol(s) the build needs, e.g. {lib.missing_symbols[0]}",
                detail="Loading fails with \"undefined symbol: " + lib.missing_symbols[0] + "\".",
                fix=(f"use the copy installed for this build ({lib.pip_copy}): remove {lib.path.rsplit('/', 1)[0]} "
                     "from LD_LIBRARY_PATH") if shadowed else
                    f"upgrade the package that ships {lib.soname} to the version the torch wheel pins",
                area="cuda-libs", evidence=lib.evidence + [Evidence("elf", lib.path, "does not define "
                                                                    + ", ".join(lib.missing_symbols[:3]))],
                subject=f"{lib.soname}:symbols"))
            continue
        want = _expected_for(lib, f.expected)
        if lib.version and want and (pin := older_than(lib.version, want.specifier)):
            findings.append(Finding(
                "cuda.library-too-old", Level.ERROR,
                f"{lib.soname} at {lib.path} is {lib.version}; the torch wheel needs {want.package} {want.specifier}",
                fix=f"pip install '{want.package}-cu{want.cuda_major}{want.specifier}'" if want.cuda_major else
                    f"pip install '{want.package}{want.specifier}'",
                area="cuda-libs", evidence=lib.evidence + want.evidence, subject=lib.soname))
    by_package: dict[str, list] = {}
    for p in f.pip_packages:
        by_package.setdefault(p.package, []).append(p)
    for package, dists in sorted(by_package.items()):
        majors = sorted({d.cuda_major for d in dists if d.cuda_major is not None})
        if len(majors) > 1:
            names = ", ".join(f"{d.name} {d.version}" for d in dists)
            keep = max((e.cuda_major for e in f.expected if e.package == package and e.cuda_major), default=None)
            drop = [d.name for d in dists if keep is not None and d.cuda_major != keep] or [d.name for d in dists[:-1]]
            findings.append(Finding(
                "cuda.library-mixed-majors", Level.WARNING,
                f"{package} is installed for CUDA {' and '.join(map(str, majors))}: {names}",
                detail="Both wheels put a library with the same soname under site-packages/nvidia; which one loads "
                       "depends on import order, and the other CUDA major's copy fails with undefined symbols.",
                fix=f"pip uninstall {' '.join(drop)}", area="cuda-libs",
                evidence=[e for d in dists for e in d.evidence], subject=package))
    for p in f.pip_packages:
        want = next((e for e in f.expected if e.package == p.package and e.cuda_major == p.cuda_major), None)
        if want and (pin := older_than(p.version, want.specifier)) and not any(
                x.id == "cuda.library-too-old" and p.package.split("-")[-1] in x.subject for x in findings):
            findings.append(Finding(
                "cuda.library-too-old", Level.WARNING,
                f"{p.name} {p.version} is installed; the torch wheel pins {want.specifier}",
                fix=f"pip install '{p.name}{want.specifier}'", area="cuda-libs",
                evidence=p.evidence + want.evidence, subject=p.name))
    loaded = sum(1 for lib in f.libraries if lib.path)
    summary = f"{loaded} of {len(f.libraries)} CUDA libraries of libtorch_cuda resolve" if f.libraries else \
        f"{len(f.pip_packages)} nvidia-* pip packages"
    return Area("cuda-libs", "CUDA libraries", summary, details, findings)
