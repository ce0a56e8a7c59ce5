"""TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH: what a torch extension (or a source build) will be
compiled for, against the visible GPUs and what the toolkit's nvcc can target. Pure."""

from __future__ import annotations

import re

from doctor import fixes
from doctor.catalog.toolkit import CPP_EXTENSION_ARCHES, NAMED_ARCHES, compute_capability, nvcc_targets
from doctor.model import Area, Evidence, Finding, Level
from doctor.record import record

MAX_ENTRIES = 64


@record(frozen=True)
class ArchEntry:
    """One entry of TORCH_CUDA_ARCH_LIST, as written and as understood."""
    text: str  # as written: "8.6+PTX", "sm_90a", "Ampere" (expanded)
    cc: str | None  # "8.6", "9.0a"; None when unreadable
    ptx: bool
    cpp_extension_ok: bool  # the spelling torch.utils.cpp_extension accepts


def _cc_key(cc: str) -> tuple[int, int]:
    major, minor = cc.rstrip("af").split(".")
    return int(major), int(minor)


def parse_arch_list(value: str) -> list[ArchEntry]:
    """Entries of a TORCH_CUDA_ARCH_LIST value: ';', ' ' or ',' separated; names expanded as torch does."""
    text = value.replace(" ", ";").replace(",", ";")
    for name, expansion in NAMED_ARCHES:
        text = text.replace(name, expansion)
    out = []
    for token in [t for t in text.split(";") if t][:MAX_ENTRIES]:
        ptx = token.endswith("+PTX")
        core = token[:-4] if ptx else token
        if m := re.fullmatch(r"(\d{1,2})\.(\d)([af]?)", core):
            cc = f"{m.group(1)}.{m.group(2)}{m.group(3)}"
            out.append(ArchEntry(token, cc, ptx, cc in CPP_EXTENSION_ARCHES))
        elif m := re.fullmatch(r"(?:sm|compute)_(\d{1,2})(\d)([af]?)", core):
            out.append(ArchEntry(token, f"{m.group(1)}.{m.group(2)}{m.group(3)}", ptx or core.startswith("compute_"), False))
        else:
            out.append(ArchEntry(token[:40], None, ptx, False))
    return out


def covers(entries: list[ArchEntry], cc: str) -> str | None:
    """"sm" when a cubin runs on this GPU, "ptx" when only PTX JIT does, None when nothing does.
    An arch-specific entry (9.0a) runs only on exactly that GPU; PTX runs on any newer one."""
    want = _cc_key(cc)
    for e in entries:
        if e.cc and _cc_key(e.cc) == want:
            return "sm"
    # A cubin also runs on a newer GPU of the same major (sm_80 on an 8.6 card).
    for e in entries:
        if e.cc and not e.cc.endswith(("a", "f")) and _cc_key(e.cc)[0] == want[0] and _cc_key(e.cc) <= want:
            return "sm"
    if any(e.cc and e.ptx and not e.cc.endswith(("a", "f")) and _cc_key(e.cc) <= want for e in entries):
        return "ptx"
    return None


def _nvcc_can(gpu_codes: list[str], nvcc_release: str | None) -> tuple[set[tuple[int, int]], str] | None:
    """The base targets the active nvcc builds, and how the finding names that nvcc: its own
    `--list-gpu-code`, else the catalog's range for its release (older nvcc releases lack the flag)."""
    if gpu_codes:
        can = {_cc_key(cc) for c in gpu_codes if (cc := compute_capability(c))}
        return can, f"(its --list-gpu-code ends at {gpu_codes[-1]})"
    if nvcc_release and (targets := nvcc_targets(nvcc_release)):
        return {_cc_key(cc) for cc in targets}, f"(CUDA {nvcc_release}'s nvcc builds {targets[0]} to {targets[-1]})"
    return None


def built_when_unset(gpu_ccs: list[str], torch_archs: tuple[str, ...]) -> list[str]:
    """What torch.utils.cpp_extension builds with TORCH_CUDA_ARCH_LIST unset: each visible GPU's
    capability, clamped to the newest the torch build carries (`torch_archs`; none: unclamped)."""
    top = max((_cc_key(a) for a in torch_archs), default=None)
    out = {cc if top is None or _cc_key(cc) <= top else "%d.%d" % top for cc in gpu_ccs}
    return sorted(out, key=_cc_key)


def cuda_arch_area(env: dict[str, str], gpu_ccs: list[str], gpu_codes: list[str], cuda_build: bool,
                   rocm_gfx: list[str] = (), nvcc_release: str | None = None,
                   torch_archs: tuple[str, ...] = ()) -> Area | None:
    """`gpu_ccs`: compute capabilities of the visible NVIDIA GPUs ("8.6"); `gpu_codes`: the active
    nvcc's `--list-gpu-code` (sm_75 …) and `nvcc_release` its CUDA release ("11.0"); `cuda_build`:
    torch or libtorch is a CUDA build; `torch_archs`: what the Python torch's CUDA build carries
    (from the catalog), which cpp_extension clamps the GPUs' capabilities to."""
    value = env.get("TORCH_CUDA_ARCH_LIST")
    rocm = env.get("PYTORCH_ROCM_ARCH")
    if value is None and rocm is None and not cuda_build:
        return None
    findings: list[Finding] = []
    details: list[str] = []
    nvcc = _nvcc_can(gpu_codes, nvcc_release)
    if value is None or value.strip() in ("", "native"):
        if gpu_ccs:
            ccs = built_when_unset(gpu_ccs, torch_archs)
            details.append(f"TORCH_CUDA_ARCH_LIST unset: extensions are built for the visible GPUs: "
                           f"{';'.join(ccs[:-1] + [ccs[-1] + '+PTX'])}")
            for cc in ccs if nvcc and torch_archs else ():
                if _cc_key(cc) not in nvcc[0]:
                    findings.append(_nvcc_cannot(
                        cc, f"this nvcc cannot target this GPU's {cc} {nvcc[1]}",
                        fixes.nvcc_for_arch(cc, instead=_newest_below(cc, nvcc[0])),
                        [Evidence("env", "TORCH_CUDA_ARCH_LIST", "unset")], f"{cc}:nvcc",
                        why="With TORCH_CUDA_ARCH_LIST unset, torch.utils.cpp_extension builds for the visible GPUs; "))
        elif cuda_build:
            findings.append(Finding(
                "cuda.arch-list-misses-gpu", Level.WARNING,
                "TORCH_CUDA_ARCH_LIST is unset and no GPU is visible: torch extensions have no architecture to build for",
                detail="torch.utils.cpp_extension takes the list from the visible GPUs when the variable is unset; on a "
                       "build machine or CI runner without a GPU it has none (IndexError: list index out of range).",
                fix="export TORCH_CUDA_ARCH_LIST=\"8.0;8.6;8.9;9.0+PTX\" (the GPUs the build must run on)",
                area="cuda", evidence=[Evidence("env", "TORCH_CUDA_ARCH_LIST", "unset")], subject="TORCH_CUDA_ARCH_LIST"))
    else:
        entries = parse_arch_list(value)
        details.append("TORCH_CUDA_ARCH_LIST: " + ", ".join(e.text + (f" → {e.cc}" if e.cc and e.cc != e.text else "")
                                                           for e in entries))
        ev = [Evidence("env", "TORCH_CUDA_ARCH_LIST", value[:200])]
        for e in entries:
            if e.cc is None or not e.cpp_extension_ok:
                better = (e.cc + ("+PTX" if e.ptx else "")) if e.cc else None
                findings.append(Finding(
                    "cuda.arch-list-invalid", Level.ERROR,
                    f"TORCH_CUDA_ARCH_LIST entry {e.text!r} is not one torch accepts",
                    detail="torch.utils.cpp_extension raises \"Unknown CUDA arch (" + e.text + ") or GPU not supported\".",
                    fix=f"write it as {better}" if better and better != e.text else
                        "use compute capabilities such as 8.6, 9.0a or 12.0+PTX, or names such as Ampere, Hopper",
                    area="cuda", evidence=ev, subject=e.text))
        if nvcc:
            # nvcc lists base targets (sm_90); the arch-specific 9.0a builds for the same GPU.
            for e in entries:
                if e.cc and _cc_key(e.cc) not in nvcc[0]:
                    findings.append(_nvcc_cannot(e.cc, f"this nvcc cannot target {e.text} {nvcc[1]}",
                                                 fixes.nvcc_for_arch(e.cc, e.text), ev, f"{e.text}:nvcc"))
        for cc in sorted(set(gpu_ccs), key=_cc_key):
            how = covers(entries, cc)
            if how is None:
                findings.append(Finding(
                    "cuda.arch-list-misses-gpu", Level.WARNING,
                    f"TORCH_CUDA_ARCH_LIST ({value[:60]}) builds nothing that runs on this GPU (compute capability {cc})",
                    detail="The extension loads, then fails with \"no kernel image is available for execution on the device\".",
                    fix=f"add {cc} to TORCH_CUDA_ARCH_LIST (export TORCH_CUDA_ARCH_LIST=\"{value.strip()};{cc}\")",
                    area="cuda", evidence=ev, subject=cc))
            elif how == "ptx":
                details.append(f"GPU {cc}: only PTX (JIT-compiled at first use)")
    if rocm is not None:
        wanted = [t for t in re.split(r"[;, ]+", rocm) if t][:MAX_ENTRIES]
        details.append("PYTORCH_ROCM_ARCH: " + ", ".join(wanted))
        bad = [t for t in wanted if not re.fullmatch(r"gfx[0-9a-f]{3,4}(?::[\w+-]+)?", t)]
        for t in bad:
            findings.append(Finding("cuda.arch-list-invalid", Level.ERROR, f"PYTORCH_ROCM_ARCH entry {t[:40]!r} is not a gfx target",
                                    fix="use gfx names such as gfx90a;gfx942;gfx1100", area="cuda",
                                    evidence=[Evidence("env", "PYTORCH_ROCM_ARCH", rocm[:200])], subject=t[:40]))
        for gfx in sorted(set(rocm_gfx)):
            if gfx not in {t.split(":")[0] for t in wanted}:
                findings.append(Finding(
                    "cuda.arch-list-misses-gpu", Level.WARNING, f"PYTORCH_ROCM_ARCH ({rocm[:60]}) does not include this GPU's {gfx}",
                    fix=f"export PYTORCH_ROCM_ARCH=\"{rocm.strip()};{gfx}\"", area="cuda",
                    evidence=[Evidence("env", "PYTORCH_ROCM_ARCH", rocm[:200])], subject=gfx))
    summary = details[0] if details else "TORCH_CUDA_ARCH_LIST unset"
    return Area("cuda-arch", "GPU architectures to build", summary, details, findings)


def _nvcc_cannot(cc: str, title: str, fix: str, evidence: list[Evidence], subject: str, why: str = "") -> Finding:
    return Finding("cuda.arch-list-invalid", Level.ERROR, title,
                   detail=why + f"nvcc fails with \"Unsupported gpu architecture 'compute_{cc.replace('.', '')}'\".",
                   fix=fix, area="cuda", evidence=evidence, subject=subject)


def _newest_below(cc: str, can: set[tuple[int, int]]) -> str | None:
    """The newest target the nvcc builds that is not newer than this GPU: its cubin runs there
    (same major) or its PTX is compiled for it by the driver."""
    fit = [t for t in can if t <= _cc_key(cc)]
    return "%d.%d" % max(fit) if fit else None
