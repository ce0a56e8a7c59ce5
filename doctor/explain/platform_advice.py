"""Advice for macOS and Windows logs (issue 14): the fix speaks the log's platform, not the
machine the doctor runs on — Windows paths with cmd `set` and PowerShell `$env:` lines for a
Windows log, rpaths and install_name_tool for a macOS one — and takes its paths from the log."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from pathlib import PureWindowsPath

from doctor import fixes
from doctor.explain import advice as base
from doctor.explain.advice import Advice, MachineFacts
from doctor.quoting import pwsh_quote, sh_quote

if TYPE_CHECKING:  # the engine calls the advisors; they only read the Match they are given
    from doctor.explain.engine import Match

_WIN_LOADING = re.compile(r'Error loading "(?P<path>[^"]{1,1000})"')
_WIN_MODULE = re.compile(r"Could not find module '(?P<path>[^']{1,1000})'")
_DYLD_FROM = re.compile(r"Referenced from: (?:<[0-9A-F-]+> )?(?P<path>/\S{1,1000})")
_DEBUG = ("MDd_DynamicDebug", "MTd_StaticDebug")


def _text(match: Match) -> str:
    return "\n".join(h.line for h in match.hits)


def _cmd_set_path(folder: str) -> str | None:
    # cmd expands % even inside quotes; a Windows path cannot hold a double quote.
    return None if set('%"') & set(folder) else f'set "PATH={folder};%PATH%"'


def windows_path_fix(folder: str) -> str:
    """The PATH line for both Windows shells, for a folder named in a Windows log."""
    lines = [f"PowerShell: $env:PATH = {pwsh_quote(folder + ';')} + $env:PATH"]
    cmd = _cmd_set_path(folder)
    if cmd:
        lines.append(f"cmd: {cmd}")
    return "\n".join(lines)


def _loader(match: Match, facts: MachineFacts) -> Advice:
    system = base._platform(match, facts)
    if system == facts.system or system not in ("Windows", "Darwin"):
        return base._loader(match, facts)
    libs = list(dict.fromkeys(match.values("lib")))
    text = _text(match)
    detail = [match.rule.cause, f"The log comes from {'Windows' if system == 'Windows' else 'macOS'}; "
              f"this machine runs {facts.system}, so the fix below uses the log's own paths."]
    if system == "Windows":
        m = _WIN_LOADING.search(text) or _WIN_MODULE.search(text)
        folder = str(PureWindowsPath(m["path"]).parent) if m else None
        if "or one of its dependencies" in text:
            detail.append(f"{base._plural(libs) or 'The DLL'} exists; a DLL it imports does not load: most often the "
                          "Visual C++ 2015-2022 runtime (fbgemm.dll also needs libomp140.x86_64.dll from a recent one), "
                          "or another torch's DLLs earlier on PATH.")
        fix = ["install the latest Microsoft Visual C++ Redistributable (x64): https://aka.ms/vs/17/release/vc_redist.x64.exe"]
        folder = folder or "<libtorch>\\lib"  # the log names no folder: say where the DLLs live, in Windows form
        fix.append("a C++ program: copy the DLLs of " + folder + " beside the .exe, or put the folder first on PATH:")
        fix.append(windows_path_fix(folder))
        fix.append("then, on that machine: doctor check (it lists every c10.dll in the loader's order)")
        title = f"Windows cannot load {base._plural(libs)}" if libs else match.rule.title
        return Advice(title, detail, "\n".join(fix), subject=base._plural(libs))
    m = _DYLD_FROM.search(text)
    image = m["path"] if m else None
    lib_dir = image.rsplit("/", 1)[0] if image else "<libtorch>/lib"
    fix = [f"give the binary an rpath to the folder that holds {base._plural(libs) or 'the library'}: "
           f"install_name_tool -add_rpath {sh_quote(lib_dir)} <program>",
           f"or link with {fixes.rpath_flag(lib_dir, 'Darwin')} (CMake: CMAKE_BUILD_RPATH / CMAKE_INSTALL_RPATH)",
           "DYLD_LIBRARY_PATH works only for programs outside /usr/bin and /bin: SIP strips it from make and shell scripts"]
    if image:
        detail.append(f"Needed by {image}.")
    title = f"dyld cannot find {base._plural(libs)}" if libs else match.rule.title
    return Advice(title, detail, "\n".join(fix), subject=base._plural(libs))


def _crt(match: Match, facts: MachineFacts) -> Advice:
    found, required = match.values("found"), match.values("required")
    values = set(found) | set(required)
    debug = bool(values & set(_DEBUG)) or values == {"0", "2"}
    static = any(v.startswith("MT") for v in values)
    detail = [match.rule.cause]
    if values:
        detail.append("Values in the log: " + ", ".join(sorted(values)) + ".")
    if debug:
        title = "Debug and Release objects are linked together (LNK2038)"
        fix = ("build Release (cmake --build . --config Release) against the Release libtorch zip, or fetch the "
               "debug zip for a Debug build: doctor fetch-libtorch --platform windows-x86_64 --debug")
    elif static:
        title = "static (/MT) and DLL (/MD) C++ runtimes are linked together (LNK2038)"
        fix = ("compile everything with /MD like libtorch: CMake -DCMAKE_MSVC_RUNTIME_LIBRARY=MultiThreadedDLL "
               "(Rust: do not set +crt-static; a cc-built dependency must not force /MT)")
    else:
        title, fix = match.rule.title, match.rule.fix
    return Advice(title, detail, fix, subject="debug" if debug else "static" if static else "crt")


def _vc_runtime(match: Match, facts: MachineFacts) -> Advice:
    # one line may name several ("MSVCP140.dll not found" followed by "VCRUNTIME140.dll not found")
    names = set(match.values("lib"))
    for sign in match.rule.signs:
        for hit in match.hits:
            names.update(m["lib"] for m in sign.regex.finditer(hit.line[:4096]))
    libs = sorted({l.lower() for l in names})
    detail = [match.rule.cause]
    if any(l.endswith("d.dll") and l != "vcruntime140_1.dll" for l in libs):
        detail.append("A …D.dll is the Debug runtime: a Debug build run where Visual Studio is not installed.")
    return Advice(f"the VC++ runtime is missing: {base._plural(libs)}" if libs else match.rule.title, detail,
                  match.rule.fix, subject=base._plural(libs))


def _min_version(match: Match, facts: MachineFacts) -> Advice:
    def key(v: str) -> list[int]:
        return [int(x) for x in v.split(".") if x.isdigit()][:4]

    needs = max(match.values("needs"), key=key, default=None)
    targets = match.values("target")
    files = list(dict.fromkeys(match.values("file")))
    detail = [match.rule.cause]
    if files:
        detail.append(f"{base._plural(files[:3])}{' and others' if len(files) > 3 else ''} need{'s' * (len(files) == 1)} macOS {needs}"
                      + (f"; the build targets {min(targets, key=key)}." if targets else "."))
    if not needs:
        return Advice(match.rule.title, detail, match.rule.fix)
    fix = (f"CMake: -DCMAKE_OSX_DEPLOYMENT_TARGET={needs}   (other builds: export MACOSX_DEPLOYMENT_TARGET={needs}); "
           f"the program then runs on macOS {needs} and newer only")
    return Advice(f"the build targets an older macOS than its libraries need ({needs})", detail, fix, subject=needs)


PLATFORM_ADVISORS = {
    "macos.min-version": _min_version,
    "loader.library-not-found": _loader,
    "windows.crt-mismatch": _crt,
    "windows.vc-runtime-missing": _vc_runtime,
}
