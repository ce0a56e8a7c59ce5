"""Emit the environment for a libtorch install: setenv for each shell, GitHub, Nix, cabal, cargo, CMake.

`emit_text` is the one entry point (used by `doctor emit` and `doctor fetch-libtorch --emit`);
each format lives in its own module and starts from `variables.variables(install)`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from doctor.errors import DoctorError, UsageError
from doctor.host import Host

# format -> module with `render(install, host, **options) -> str`
FORMATS = {
    "setenv": "doctor.emit.setenv",
    "github": "doctor.emit.github",
    "nix": "doctor.emit.nix",
    "cabal": "doctor.emit.cabal",
    "cargo": "doctor.emit.cargo",
    "cmake": "doctor.emit.cmake",
}


def find_install(host: Host, root: Path | str | None = None):
    """The LibtorchInstall at `root`, or the one a build would use (as `doctor check` says)."""
    from doctor.probe.libtorch import detect_libtorch, inspect_tree
    from doctor.probe.python_torch import detect_python_torch
    from doctor.model import Evidence

    if root is not None:
        root_s = str(Path(root).expanduser())
        if not host.is_dir(root_s):
            raise DoctorError(f"--libtorch {root_s}: no such directory", "give the folder that holds lib/ and include/")
        install = inspect_tree(host, root_s, ["--libtorch"], [Evidence("arg", "--libtorch", root_s)])
    else:
        facts = detect_libtorch(host, detect_python_torch(host))
        install = facts.active_install
        if install is None:
            raise DoctorError(
                "no libtorch found to emit an environment for",
                "pass --libtorch DIR, or fetch one with `doctor fetch-libtorch`",
            )
    if not install.complete:
        raise DoctorError(
            f"{install.root} is not a complete libtorch (it needs include/torch and lib/libc10)",
            "pass --libtorch DIR naming the folder that holds lib/ and include/",
        )
    return install


def emit_text(
    fmt: str,
    root: Path | None = None,
    host: Host | None = None,
    shell: str | None = None,
    install=None,
    **options,
) -> str:
    """The text of format `fmt` for `install` (or the libtorch at `root`, or the active one).

    `shell` only matters for "setenv" (sh, bash, zsh, fish, pwsh, cmd, dotenv; default from
    $SHELL). Extra options go to the format (nix: nixpkgs_libtorch=True).
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown emit format {fmt!r}", "choose one of: " + ", ".join(FORMATS))
    host = host or Host.from_system()
    if install is None:
        install = find_install(host, root)
    module = importlib.import_module(FORMATS[fmt])
    if fmt == "setenv":
        options["shell"] = shell
    return module.render(install, host, **options)
