"""The clients area: what a tch-rs `cargo build` and a Hasktorch `cabal build` would do here.

Pure: facts from probe/tchrs.py, probe/hasktorch_cache.py, probe/client_builds.py and the
libtorch candidate the tch-rs resolution lands on.
"""

from __future__ import annotations

from doctor.catalog.tch import checks_version, libtorch_for
from doctor import fixes
from doctor.fixes import TILDE_RULE
from doctor.formats import clip
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.client_builds import StaleBuild
from doctor.probe.hasktorch_cache import HasktorchRequest
from doctor.probe.libtorch import LibtorchInstall
from doctor.probe.tchrs import TchResolution
from doctor.quoting import sh_paste

AREA = "clients"


def clients_area(tch: TchResolution | None, tree: LibtorchInstall | None, hask: HasktorchRequest | None,
                 stale: list[StaleBuild], tch_relevant: bool) -> Area | None:
    findings: list[Finding] = []
    details: list[str] = []
    if tch is not None and tch_relevant:
        details.append(f"tch-rs: cargo build would link {tch.lib_dir or 'nothing'} ({tch.why})")
        if tch.crate:
            details.append(f"    {tch.crate.path}: tch {tch.crate.tch or '-'}, torch-sys {tch.crate.torch_sys or '-'}")
        findings += tch_findings(tch, tree)
    if hask is not None and (hask.version_from_env or hask.flavour_from_env or hask.skip_download
                             or hask.home_given is not None):
        state = "cached" if hask.cached else "not cached"
        details.append(f"Hasktorch: Setup.hs would use {hask.tree or '(unsupported platform)'} ({state})")
        findings += hasktorch_findings(hask)
    findings += stale_findings(stale)
    if not details and not findings:
        return None
    bad = [f for f in findings if f.level in (Level.ERROR, Level.WARNING)]
    summary = f"{len(bad)} problem(s)" if bad else "consistent"
    return Area(AREA, "Rust / Haskell clients", summary, details, findings)


def tch_findings(t: TchResolution, tree: LibtorchInstall | None) -> list[Finding]:
    out: list[Finding] = []
    ev = t.evidence[:3]
    if t.mode == "none":
        out.append(Finding(
            "libtorch.not-found", Level.ERROR if t.crate else Level.WARNING,
            "tch-rs would find no libtorch: LIBTORCH is not set and /usr/lib/libtorch.so does not exist",
            detail=t.why + ("; LIBTORCH_INCLUDE / LIBTORCH_LIB alone are not enough: torch-sys still needs "
                            "LIBTORCH (or LIBTORCH_USE_PYTORCH)" if {"LIBTORCH_INCLUDE", "LIBTORCH_LIB"} & set(t.set_variables) else ""),
            fix=f"{fixes.FETCH}  (or export LIBTORCH_USE_PYTORCH=1)",
            area=AREA, evidence=ev, subject="tch-rs"))
        if t.download_device and t.download_device not in ("cpu", "cu118", "cu121", "cu124", "cu126", "cu128"):
            out.append(Finding(
                "libtorch.path-invalid", Level.WARNING,
                f"TORCH_CUDA_VERSION={t.set_variables.get('TORCH_CUDA_VERSION')} means {t.download_device}, which "
                "torch-sys's download-libtorch feature does not know",
                detail="build.rs accepts cpu, cu118, cu121, cu124, cu126 and cu128 and fails on anything else "
                "(\"unsupported device\").", fix="export TORCH_CUDA_VERSION=cu128  (or set LIBTORCH to a fetched tree)",
                area=AREA, evidence=ev, subject="TORCH_CUDA_VERSION"))
        return out
    for var, ok, fixed, appended, what in (
        ("LIBTORCH_INCLUDE" if t.include_from == "LIBTORCH_INCLUDE" else "LIBTORCH", t.include_ok, t.include_fix,
         "include", "include/torch"),
        ("LIBTORCH_LIB" if t.lib_from == "LIBTORCH_LIB" else "LIBTORCH", t.lib_ok, t.lib_fix, "lib", "lib/libc10"),
    ):
        if ok or t.mode == "pytorch":
            continue
        value = t.set_variables.get(var, t.prefix or "")
        if fixed:
            title = f"{var}={value} is one level too deep: torch-sys appends /{appended} itself"
            detail = (f"torch-sys uses {var}/{appended}, i.e. {value}/{appended}, which has no {what.split('/')[-1]}; "
                      f"{value} itself is that {appended} folder.")
            fix = f"export {var}={sh_paste(fixed)}"
        else:
            title = f"{var}={value} has no {what}: torch-sys would look in {value}/{appended}"
            detail = f"{var} must name the folder that CONTAINS {appended}/ (the libtorch root)."
            fix = f"export {var}=/path/to/libtorch  (the folder holding {appended}/), or unset {var}"
        if var != "LIBTORCH" or "LIBTORCH" not in t.set_variables:
            out.append(Finding("libtorch.path-invalid", Level.ERROR, title, detail=detail, fix=fix, area=AREA,
                               evidence=[Evidence("env", var, value)], subject=var))
    if t.mode != "pytorch" and tree is not None and tree.abi in ("cxx11", "pre-cxx11") and t.cxx11_abi in ("0", "1"):
        tree_flag = "1" if tree.abi == "cxx11" else "0"
        if t.cxx11_abi != tree_flag:
            how = f"LIBTORCH_CXX11_ABI={t.cxx11_abi}" if t.abi_from == "LIBTORCH_CXX11_ABI" else "LIBTORCH_CXX11_ABI unset (torch-sys's default 1)"
            out.append(Finding(
                "abi.mismatch", Level.ERROR,
                f"{how}, but {tree.root} is a {tree.abi} build",
                detail=(f"torch-sys compiles its C++ shim with -D_GLIBCXX_USE_CXX11_ABI={t.cxx11_abi} and never reads "
                        f"the tree's ABI; libtorch's own is {tree_flag} ({tree.abi_source}). The link then fails with "
                        "undefined references to c10 functions taking std::string."),
                fix=("unset LIBTORCH_CXX11_ABI" if tree_flag == "1" else "export LIBTORCH_CXX11_ABI=0"),
                area=AREA, evidence=[*ev[:1], *[e for e in tree.evidence if "ABI" in str(e) or e.kind == "elf"][:1]],
                subject="LIBTORCH_CXX11_ABI"))
    out += _version(t, tree)
    return out


def _version(t: TchResolution, tree: LibtorchInstall | None) -> list[Finding]:
    crate = t.crate
    sys_version = crate and (crate.torch_sys or crate.tch)
    expected = libtorch_for(sys_version) if sys_version else None
    have = t.checked_version or (tree.version if tree else None)
    if not expected or not have or have == expected:
        return []
    enforced = checks_version(sys_version) and t.checked_version is not None
    if t.bypass_version_check:
        level, how = Level.WARNING, ("LIBTORCH_BYPASS_VERSION_CHECK is set, so the build script lets it through; "
                                     "expect missing or changed symbols at link or run time")
    elif enforced:
        level, how = Level.ERROR, (f"the build stops with \"this tch version expects PyTorch {expected}, got {have}\" "
                                   "(LIBTORCH_BYPASS_VERSION_CHECK would skip the check, not the incompatibility)")
    else:
        level, how = Level.ERROR, ("the build script does not check it here (no build-version file), so it fails later "
                                   "at link or run time; LIBTORCH_BYPASS_VERSION_CHECK is not involved")
    return [Finding(
        "version.mismatch", level,
        f"torch-sys {sys_version} (in {crate.path}) needs libtorch {expected}; {t.lib_dir} is {have}",
        detail=f"{how}. Table: doctor/catalog/tch.py (from tch-rs's build.rs TORCH_VERSION per release).",
        fix=fixes.fetch_and_setenv(expected),
        area=AREA, evidence=[Evidence("file", crate.path, f"torch-sys {sys_version}"),
                             Evidence("file", t.checked_from or (tree.root if tree else ""), have)],
        subject="tch-rs")]


def hasktorch_findings(h: HasktorchRequest) -> list[Finding]:
    # With a relative LIBTORCH_HOME the tree Setup.hs wants is not one folder that could be looked up from here.
    return _relative_home(h) or _not_cached(h)


def _relative_home(h: HasktorchRequest) -> list[Finding]:
    """Setup.hs uses LIBTORCH_HOME as written, from libtorch-ffi's package folder (its cwd)."""
    given = h.home_given
    if given is None or h.skip_download or h.nix_sandbox or not h.platform or given.startswith("/"):
        return []  # (no platform: Windows and others, where Hasktorch does not build)
    where = f"{h.version}/{h.platform}/{h.flavour}"
    if given:
        why = "its ~ stays literal" if given.startswith("~") else "a relative folder"
        fix = f"export LIBTORCH_HOME={sh_paste(h.home_absolute) if h.home_absolute else '<an absolute folder>'}"
    else:
        why = "set but empty, which is not unset"
        fix = "unset LIBTORCH_HOME   (Setup.hs then uses ~/.cache/libtorch)"
    return [Finding(
        "hasktorch.relative-home", Level.WARNING,
        f"LIBTORCH_HOME={clip(repr(given), 200)} is not an absolute folder ({why}), and Hasktorch's Setup.hs takes it "
        "as written",
        detail=(f"Setup.hs joins LIBTORCH_HOME/{where} as it is ({TILDE_RULE}) and runs in libtorch-ffi's "
                "package folder: it looks for the tree there (and downloads one there when it is missing), then "
                "configures that relative lib dir as extra-lib-dirs and rpath, so the program finds libtorch only "
                "when started from that folder."),
        fix=fix, area=AREA, evidence=[Evidence("env", "LIBTORCH_HOME", clip(repr(given), 200))], subject="LIBTORCH_HOME")]


def _not_cached(h: HasktorchRequest) -> list[Finding]:
    if h.skip_download or h.nix_sandbox or h.cached or not h.tree:
        return []
    if not (h.version_from_env or h.flavour_from_env):
        return []
    return [Finding(
        "hasktorch.not-cached", Level.WARNING,
        f"Hasktorch asks for libtorch {h.version} ({h.flavour}), which is not in its cache",
        detail=(f"Setup.hs builds against {h.tree} (LIBTORCH_VERSION / LIBTORCH_CUDA_VERSION / LIBTORCH_HOME) "
                f"and downloads it when {h.tree}/.ok is missing; offline or in CI that download fails, and no other "
                "cached version is used instead."),
        fix=f"doctor fetch-libtorch --version {h.version} --variant {h.flavour}",
        area=AREA, evidence=[Evidence("file", h.tree, "missing or no .ok marker")], subject=h.tree)]


def stale_findings(stale: list[StaleBuild]) -> list[Finding]:
    return [Finding(
        "build.stale-variant", Level.WARNING,
        f"{s.build_dir} was built against {s.built_against}, not the libtorch now in use ({s.now})",
        detail=(f"{s.tool} reuses what it built: {s.evidence_file} records {s.built_against}. The next build "
                "links or loads a mix of both (a CPU build that cannot find CUDA, or a missing libtorch_cuda)."),
        fix=s.clean, area=AREA, evidence=[Evidence("file", s.evidence_file, s.built_against)], subject=s.build_dir)
        for s in stale]
