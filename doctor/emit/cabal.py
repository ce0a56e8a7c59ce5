"""A cabal.project.local for Hasktorch (and any package with a C++ shim over libtorch).

What libtorch-ffi's Setup.hs (hasktorch 7395e0b) adds in its confHook, written where cabal
reads it instead: `extra-lib-dirs` = <lib>, `extra-include-dirs` = <include> and
<include>/torch/csrc/api/include, and the rpath (`-Wl,-rpath,<lib>`) so the executable runs
without LD_LIBRARY_PATH. Setup.hs passes the rpath as ld program arguments; a project file's
`ld-options` only reaches `ld -r` steps, so the rpath goes to GHC's link as `-optl` instead
(`-optl-Xlinker -optl-rpath -optl-Xlinker -optl<lib>` when <lib> holds a comma).
On macOS Setup.hs also adds `-optl-ld_classic` (Xcode 15's new linker mishandles GHC's objects)
and no rpath for dynamic executables (Cabal already adds one; a second is rejected by dyld:
"duplicate LC_RPATH").
"""

from __future__ import annotations

from doctor.emit._common import header_lines, refuse_control
from doctor.host import Host
from doctor.quoting import rpath_words


def cabal_str(value: str) -> str:
    # cabal reads a quoted path as a Haskell string literal.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(install, host: Host) -> str:
    include_dirs = [str(d) for d in install.include_dirs]
    lib_dir = str(install.lib_dir)
    refuse_control([*include_dirs, lib_dir], "cabal.project.local")
    includes = ", ".join(cabal_str(d) for d in include_dirs)
    ghc_options = []
    if host.system == "Darwin":
        ghc_options.append("-optl-ld_classic")
    else:
        # one -optl a word: GHC hands each to the C compiler driver as it is (a comma in `-Wl,` splits)
        ghc_options += [cabal_str(f"-optl{word}") for word in rpath_words(lib_dir, host.system)]
    lines = ["-- " + line for line in header_lines(install, "doctor emit cabal")]
    lines += [
        "-- Put in cabal.project.local (or append to it). Executables get an rpath to the lib dir.",
        "",
        "package libtorch-ffi",
        f"  extra-include-dirs: {includes}",
        f"  extra-lib-dirs: {cabal_str(lib_dir)}",
        "",
        "package *",
        f"  extra-include-dirs: {includes}",
        f"  extra-lib-dirs: {cabal_str(lib_dir)}",
        f"  ghc-options: {' '.join(ghc_options)}",
        "  shared: True",
        "  executable-dynamic: True",
    ]
    if host.system == "Darwin":
        lines += ["", "-- macOS: -optl-ld_classic as Hasktorch's Setup.hs adds (Xcode 15+ linker); no extra rpath,",
                  "-- Cabal adds one per extra-lib-dir for dynamic executables and dyld rejects a duplicate."]
    return "\n".join(lines) + "\n"
