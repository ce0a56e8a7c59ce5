"""Emit the environment for a libtorch install: setenv for each shell, GitHub, Nix, cabal, cargo, CMake.

`emit_text` is the one entry point (used by `doctor emit` and `doctor fetch-libtorch --emit`);
each format lives in its own module and starts from `variables.variables(install)`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from doctor.errors import DoctorError, UsageError
from doctor.host import Host

if TYPE_CHECKING:
    from doctor.probe.libtorch import LibtorchInstall

# format -> module with `render(install, host, **options) -> str`
FORMATS = {
    "setenv": "doctor.emit.setenv",
    "github": "doctor.emit.github",
    "nix": "doctor.emit.nix",
    "cabal": "doctor.emit.cabal",
    "cargo": "doctor.emit.cargo",
    "cmake": "doctor.emit.cmake",
}


def find_install(host: Host, root: Path | str | None = None) -> LibtorchInstall:
    """The LibtorchInstall at `root`, or the one a build would use (as `doctor check` says)."""
    from doctor.diagnose.common import not_a_directory
    from doctor.quoting import sh_paste
    from doctor.probe.libtorch import detect_libtorch, inspect_tree
    from doctor.probe.python_torch import detect_python_torch
    from doctor.model import Evidence

    if root is not None:
        root_s = str(Path(root).expanduser())
        if not host.is_dir(root_s):
            raise DoctorError(f"--libtorch {root_s} {not_a_directory(host.path_kind(root_s))}",
                              "give the folder that holds lib/ and include/", error_id="emit.no-such-libtorch")
        install = inspect_tree(host, root_s, ["--libtorch"], [Evidence("arg", "--libtorch", root_s)])
        install.hasktorch = install.hasktorch or _hasktorch_layout(host, root_s)
    else:
        facts = detect_libtorch(host, detect_python_torch(host))
        install = facts.active_install
        if install is None:
            raise DoctorError(
                "no libtorch found to emit an environment for",
                "pass --libtorch DIR, or fetch one with `doctor fetch-libtorch`",
                error_id="emit.no-libtorch",
            )
    if not install.exists:
        named_by = next((f"{o}=" for o in install.origins if o in ("LIBTORCH", "Torch_DIR")), "")
        raise DoctorError(f"{named_by}{install.root} {not_a_directory(install.root_kind)}",
                          "point it at the folder that holds lib/ and include/, or pass --libtorch DIR",
                          error_id="emit.no-such-libtorch")
    if not install.complete:
        raise DoctorError(
            f"{install.root} is not a complete libtorch (it needs include/torch and lib/libc10)"
            + (f"; the libtorch root is {install.nearby_root}" if install.nearby_root else ""),
            f"pass --libtorch {sh_paste(install.nearby_root)}" if install.nearby_root
            else "pass --libtorch DIR naming the folder that holds lib/ and include/",
            error_id="emit.incomplete-libtorch",
        )
    return install


def _hasktorch_layout(host: Host, root: str) -> dict | None:
    """Hasktorch's cache layout <home>/<version>/<platform>/<flavour> with its `.ok` marker: a
    tree named by --libtorch there still gets LIBTORCH_HOME and friends."""
    from pathlib import PurePath

    from doctor.probe.libtorch import HASKTORCH_PLATFORMS

    p = PurePath(root)
    if len(p.parts) < 4 or p.parts[-2] not in HASKTORCH_PLATFORMS or not host.exists(p / ".ok"):
        return None
    return {"home": str(p.parents[2]), "version": p.parts[-3], "platform": p.parts[-2], "flavour": p.parts[-1], "ok": True}


def emit_text(
    fmt: str,
    root: Path | None = None,
    host: Host | None = None,
    shell: str | None = None,
    install: LibtorchInstall | None = None,
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


def emit_to(
    fmt: str,
    host: Host,
    install: LibtorchInstall,
    output: Path | None = None,
    shell: str | None = None,
    **options,
) -> tuple[bytes, list[str]]:
    """Emit as `doctor emit` does: (bytes for stdout, messages for stderr).

    Bytes, so that `click.echo` passes them through untouched: given text, it strips ANSI escape
    sequences when stdout is not a terminal, which would silently change a path holding ESC
    inside `eval "$(doctor emit setenv)"`. With `output`, the bytes go to that file (stdout gets nothing). The github
    format with no `output` appends to $GITHUB_ENV / $GITHUB_PATH when those are set.
    """
    if fmt == "github" and output is None and (host.env.get("GITHUB_ENV") or host.env.get("GITHUB_PATH")):
        from doctor.emit.github import write

        return b"", write(install, host)
    text = emit_text(fmt, host=host, shell=shell, install=install, **options)
    from doctor.emit.setenv import default_shell  # here: `fetch-libtorch` imports this package for FORMATS

    data = _encode(text, fmt, shell or (default_shell(host) if fmt == "setenv" else None))
    if output is None:
        return data, []
    write_output(host, output, data)
    return b"", [f"wrote {output}"]


def _encode(text: str, fmt: str, shell: str | None) -> bytes:
    """The bytes of `text`. A path that is not UTF-8 reaches Python as lone surrogates: POSIX
    shells and fish get its original bytes back; the other formats are UTF-8 text and refuse it."""
    from doctor.quoting import encode_exact, refuse_undecodable

    if fmt == "setenv" and shell in ("sh", "bash", "zsh", "fish", "dash"):
        return encode_exact(text)
    for line in text.splitlines():  # name the line, not the whole file
        refuse_undecodable(line, f"the {fmt} format")
    return text.encode("utf-8")


def write_output(host: Host, output: Path, data: bytes) -> None:
    """Write `data` to `output` (-o), byte-exact and atomic (a shell sourcing it meanwhile
    sees the old file or the new one); a file-system error is a message, not a crash. A
    symlink at `output` is followed, and a named pipe or character device (/dev/stdout, `>(…)`)
    written through, as `> file` would; a block device or socket is refused."""
    # Bytes, not text: cmd files carry \r\n, which text mode would double on Windows.
    host.write_atomic(output, data, follow=True, doing="write",
                      instead="give -o a file in a folder you can write, or leave -o out to print to stdout")
