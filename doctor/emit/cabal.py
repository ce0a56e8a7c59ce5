"""A cabal.project.local fragment for Hasktorch: where libtorch-ffi finds headers and libraries.

Both include dirs are needed (`include` and `include/torch/csrc/api/include`); `shared` and
`executable-dynamic` because libtorch is only shipped as shared libraries.
"""

from __future__ import annotations

from doctor.emit._common import header_lines, refuse_control
from doctor.emit.variables import loader_variable
from doctor.host import Host


def cabal_str(value: str) -> str:
    # cabal reads a quoted path as a Haskell string literal.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(install, host: Host) -> str:
    include_dirs = [str(d) for d in install.include_dirs]
    lib_dir = str(install.lib_dir)
    refuse_control([*include_dirs, lib_dir], "cabal.project.local")
    includes = ", ".join(cabal_str(d) for d in include_dirs)
    lines = ["-- " + line for line in header_lines(install, "doctor emit cabal")]
    lines += [
        "-- Put in cabal.project.local (or append to it). At run time the loader still needs",
        f"-- {loader_variable(host.system)}: see `doctor emit setenv`.",
        "",
        "package libtorch-ffi",
        f"  extra-include-dirs: {includes}",
        f"  extra-lib-dirs: {cabal_str(lib_dir)}",
        "",
        "package *",
        f"  extra-lib-dirs: {cabal_str(lib_dir)}",
        "  shared: True",
        "  executable-dynamic: True",
    ]
    return "\n".join(lines) + "\n"
