"""macOS and Windows trees: facts from their Mach-O / PE files and the simulated loader → the
"Platform" area. Pure: no Host, no I/O. What needs the running machine is marked so."""

from __future__ import annotations

from doctor import fixes
from doctor.catalog.cuda import MPS_MIN_MACOS, compare_versions
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.platform_tree import PlatformTreeFacts
from doctor.quoting import pwsh_quote, sh_quote

NOT_HERE = "not this machine"


def platform_area(p: PlatformTreeFacts | None) -> Area | None:
    if p is None:
        return None
    return _mac_area(p) if p.mac is not None else _win_area(p)


def _mac_area(p: PlatformTreeFacts) -> Area:
    m = p.mac
    details, findings = [], []
    for leaf, archs in m.archs.items():
        details.append(f"{leaf}: {'+'.join(archs)}, install name {m.install_names.get(leaf, '-')}, "
                       f"minimum macOS {m.min_macos.get(leaf, '?')}, rpaths {', '.join(m.images[leaf].slices[0].rpaths) or '-'}")
    details.append(f"C++ library: {m.cxx_stdlib or 'unknown'} — no _GLIBCXX_USE_CXX11_ABI question on macOS")
    for r in m.resolutions:
        if r.name.startswith(("/usr/lib/", "/System/")) and not m.on_this_machine:
            continue
        details.append(f"    {r.image} needs {r.name}: {r.via + ' → ' + r.path if r.path else 'NOT FOUND'}")
    if not m.on_this_machine:
        details.append(f"DYLD_LIBRARY_PATH, DYLD_FALLBACK_LIBRARY_PATH, system libraries, CPU and macOS version: {NOT_HERE}")
    for leaf, why in m.unreadable.items():
        findings.append(Finding("libtorch.path-invalid", Level.ERROR, f"{leaf} is not a usable Mach-O file: {why}",
                                fix="install the tree again (doctor fetch-libtorch --platform macos-arm64)", area="platform",
                                evidence=[Evidence("file", f"{m.lib_dir}/{leaf}", why)], subject=leaf))
    for r in m.unresolved:
        tried = "; ".join(r.tried) or "nothing to try"
        findings.append(Finding(
            "loader.library-not-found", Level.ERROR,
            f"dyld cannot find {r.name} needed by {r.image}: Library not loaded",
            detail=f"Tried: {tried}. An @rpath name resolves only through the LC_RPATHs of the image and of the "
            "images that loaded it.",
            fix=f"install_name_tool -add_rpath @loader_path {sh_quote(m.lib_dir + '/' + r.image)}   (or put the missing "
            f"library back; a program of yours: link with {fixes.rpath_flag(m.lib_dir, 'Darwin')})",
            area="platform", evidence=[Evidence("file", f"{m.lib_dir}/{r.image}", f"LC_LOAD_DYLIB {r.name}")], subject=r.name))
    for leaf, info in m.images.items():
        rpaths = info.slices[0].rpaths
        for dup in sorted({r for r in rpaths if rpaths.count(r) > 1}):
            findings.append(Finding("macos.duplicate-rpath", Level.ERROR, f"{leaf} has LC_RPATH {dup!r} twice",
                                    detail="dyld on macOS 15.4+ refuses such a library: 'duplicate LC_RPATH'.",
                                    fix=f"install_name_tool -delete_rpath {sh_quote(dup)} {sh_quote(m.lib_dir + '/' + leaf)}"
                                    f" && codesign -f -s - {sh_quote(m.lib_dir + '/' + leaf)}", area="platform", subject=leaf))
    archs = {a for v in m.archs.values() for a in v}
    apple = p.apple
    if apple is not None:
        want = "arm64" if apple.apple_silicon and not apple.rosetta else "x86_64"
        if archs and want not in archs:
            findings.append(Finding("arch.mismatch", Level.ERROR,
                                    f"the tree is {'+'.join(sorted(archs))}, this {'Rosetta ' if apple.rosetta else ''}process needs {want}",
                                    detail="dyld refuses it: 'incompatible architecture (have 'arm64', need 'x86_64')'."
                                    + (" This Python runs under Rosetta: use an arm64 Python." if apple.rosetta else ""),
                                    fix="use an arm64 Python (python3 -c 'import platform; print(platform.machine())' says arm64) "
                                    "or fetch a libtorch for this architecture", area="platform", subject="arch"))
        newest = max(m.min_macos.values(), key=lambda v: [int(x) for x in v.split(".")], default=None)
        if newest and apple.macos_version and compare_versions(apple.macos_version, newest) < 0:
            findings.append(Finding("macos.min-version", Level.ERROR,
                                    f"the tree needs macOS {newest}, this Mac runs {apple.macos_version}",
                                    detail="dyld refuses a dylib built for a newer macOS ('built for macOS " + newest + " which is newer than running OS').",
                                    fix="update macOS, or use an older libtorch release built for this macOS", area="platform", subject="macos"))
        mps = "yes" if apple.mps_eligible else f"no ({', '.join(apple.mps_blockers)})"
        details.append(f"this Mac: macOS {apple.macos_version or '?'}, {'Apple silicon' if apple.apple_silicon else 'Intel'}"
                       f"{', Rosetta' if apple.rosetta else ''}; MPS usable: {mps} (needs arm64 and macOS ≥ {MPS_MIN_MACOS})")
    else:
        details.append(f"MPS: the tree is {'+'.join(sorted(archs)) or '?'}; MPS needs an arm64 process on macOS ≥ {MPS_MIN_MACOS}: {NOT_HERE}")
    if m.on_this_machine and m.dyld_library_path:
        findings.append(Finding("loader.library-not-found", Level.INFO,
                                "DYLD_LIBRARY_PATH is set: SIP strips it from programs under /usr/bin (make, bash, env)",
                                detail="A build run through make or a shell script does not see it; only rpaths in the binaries work there.",
                                fix=f"link with {fixes.rpath_flag(m.lib_dir, 'Darwin')} (CMake: CMAKE_INSTALL_RPATH / CMAKE_BUILD_RPATH), "
                                "or install_name_tool -add_rpath " + sh_quote(m.lib_dir) + " <program>",
                                area="platform", evidence=[Evidence("env", "DYLD_LIBRARY_PATH", ":".join(m.dyld_library_path))], subject="sip"))
    t = p.tools
    if t is not None:
        details.append(f"this Mac's tools: CPU {t.cpu or '?'}, SDK {t.sdk_version or '?'}, Apple clang {t.clang or '?'}"
                       f"{' (' + t.clang_target + ')' if t.clang_target else ''}" + "".join(f"; missing {x}" for x in t.missing))
    bad = [f for f in findings if f.level in (Level.ERROR, Level.WARNING)]
    summary = (f"macOS tree ({'+'.join(sorted(archs)) or '?'}, libc++): "
               + (f"{len(bad)} problem(s)" if bad else "every @rpath dependency resolves") + ("" if m.on_this_machine else f"; checked from {p.host_system}"))
    return Area("platform", "Platform (macOS)", summary, details, findings)


def _win_area(p: PlatformTreeFacts) -> Area:
    w = p.win
    details, findings = [], []
    kind = "CUDA" if w.cuda else "CPU"
    for name, info in w.images.items():
        details.append(f"{name}: {info.machine}, C runtime {w.crt.get(name) or 'none'}, imports {len(info.imports)}"
                       f"{', delay-load ' + ', '.join(info.delay_imports) if info.delay_imports else ''}")
    for r in w.resolutions:
        if r.name.lower().startswith("api-ms-win-"):
            continue
        details.append(f"    {r.image} needs {r.name}: {r.via + ' → ' + r.path if r.path else 'NOT FOUND'}")
    if not w.on_this_machine:
        details.append(f"PATH, System32 and the installed VC++ redistributable: {NOT_HERE}")
    for name, why in w.unreadable.items():
        findings.append(Finding("libtorch.path-invalid", Level.ERROR, f"{name} is not a usable PE file: {why}",
                                fix="install the tree again (doctor fetch-libtorch --platform windows-x86_64)", area="platform",
                                subject=name))
    machines = set(w.machines.values())
    if len(machines) > 1:
        findings.append(Finding("arch.mismatch", Level.ERROR, f"the DLLs are for different machines: {w.machines}",
                                fix="install one tree for one architecture", area="platform", subject="machines"))
    debug = [n for n, f in w.crt.items() if f in ("debug", "mixed")]
    if debug:
        findings.append(Finding("windows.crt-mismatch", Level.ERROR,
                                f"{', '.join(debug)} import the Debug C runtime (MSVCP140D.dll / VCRUNTIME140D.dll)",
                                detail="Mixing Debug and Release runtimes fails at link time (LNK2038: mismatch detected for "
                                "'_ITERATOR_DEBUG_LEVEL' / 'RuntimeLibrary') or crashes at run time; Debug runtimes exist only "
                                "where Visual Studio is installed.",
                                fix="use the Release libtorch with a Release build (cmake --build . --config Release), or the "
                                "Debug libtorch zip for a Debug build, never both", area="platform",
                                evidence=[Evidence("file", f"{w.lib_dir}\\{n}", ", ".join(w.images[n].crt)) for n in debug if n in w.images],
                                subject="crt"))
    missing = [r for r in w.unresolved if r.name.lower() not in ("msvcp140d.dll", "vcruntime140d.dll", "vcruntime140_1d.dll", "ucrtbased.dll")]
    redist = w.missing_redist
    if redist:
        findings.append(Finding("windows.vc-runtime-missing", Level.ERROR,
                                f"the VC++ runtime is missing: {', '.join(redist)} not in System32 or on PATH",
                                detail="torch DLLs then fail with 'OSError: [WinError 126] … Error loading \"…\\c10.dll\" or one of its dependencies'.",
                                fix="install the Microsoft Visual C++ 2015-2022 Redistributable (x64): https://aka.ms/vs/17/release/vc_redist.x64.exe",
                                area="platform", subject="vcredist"))
    others = [r for r in missing if r.name.lower() not in redist]
    for r in others:
        findings.append(Finding("loader.library-not-found", Level.ERROR, f"{r.name} needed by {r.image} is found nowhere",
                                detail="Searched: the program's folder, System32, then PATH in order (Python: os.add_dll_directory folders).",
                                fix=f"copy the DLLs of {w.lib_dir} beside the program, or (PowerShell): "
                                f"$env:PATH = {pwsh_quote(w.lib_dir + ';')} + $env:PATH"
                                + ("" if set('%"') & set(w.lib_dir) else f' (cmd: set "PATH={w.lib_dir};%PATH%")'),
                                area="platform", subject=r.name))
    if len(w.c10_candidates) > 1:
        first = w.c10_candidates[0]
        own = [c for c in w.c10_candidates if c.lower().startswith(w.lib_dir.lower())]
        if own and first != own[0]:
            findings.append(Finding("windows.dll-shadowed", Level.ERROR,
                                    f"another c10.dll loads first: {first}",
                                    detail="The loader takes the first c10.dll in its order; this one comes before the tree's "
                                    f"({own[0]}): symbols then mismatch ('The specified procedure could not be found').",
                                    fix=f"remove the folder of {first} from PATH, or put {w.lib_dir} before it",
                                    area="platform", subject="c10.dll"))
    t = p.tools
    if t is not None:
        vs = ", ".join(f"{v['name']} {v['version']}" for v in t.visual_studio) or "none found"
        details.append(f"this machine's tools: Visual Studio {vs}; cl.exe {t.cl_version or '?'} for {t.cl_target or '?'}"
                       + "".join(f"; missing {x}" for x in t.missing))
    bad = [f for f in findings if f.level in (Level.ERROR, Level.WARNING)]
    summary = (f"Windows {kind} tree ({'+'.join(sorted(machines)) or '?'}, {', '.join(sorted({c for c in w.crt.values() if c})) or 'no'} C runtime): "
               + (f"{len(bad)} problem(s)" if bad else "every DLL it needs resolves") + ("" if w.on_this_machine else f"; checked from {p.host_system}"))
    return Area("platform", "Platform (Windows)", summary, details, findings)
