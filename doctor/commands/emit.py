"""`doctor emit FORMAT`: write the environment for a libtorch (setenv, github, nix, cabal, cargo, cmake)."""

from __future__ import annotations

from pathlib import Path

import click

from doctor.emit import FORMATS
from doctor.emit.setenv import SHELLS
from doctor.commands._say import say


@click.command("emit")
@click.argument("fmt", metavar="FORMAT", type=click.Choice(list(FORMATS)))
@click.option("--libtorch", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The libtorch tree (the folder holding lib/ and include/). Default: the one a build "
              "would use, as `doctor check` reports it.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to FILE instead of stdout (replaced in one step; a named pipe or character "
              "device, such as /dev/stdout, is written through as `>` does).")
@click.option("--shell", type=click.Choice(SHELLS), default=None,
              help="For setenv: the shell that will read it. Default: from $SHELL.")
@click.option("--nixpkgs-libtorch", is_flag=True,
              help="For nix: use nixpkgs' libtorch-bin instead of fetching this tree's archive.")
def command(fmt: str, root: Path | None, output: Path | None, shell: str | None, nixpkgs_libtorch: bool) -> int:
    """Write the environment that makes builds and runs find a libtorch.

    \b
    setenv  variables for a shell: eval "$(doctor emit setenv)", or -o setenv.sh and source it
    github  NAME<<DELIMITER blocks, appended to $GITHUB_ENV (and $GITHUB_PATH) when those are set
    nix     a flake.nix: fetchzip of the tree's archive (or --nixpkgs-libtorch) and a devShell
    cabal   a cabal.project.local for Hasktorch (include and lib dirs, rpath)
    cargo   a .cargo/config.toml for tch-rs ([env], rpath, CUDA link args)
    cmake   a CMakeUserPresets.json: cmake --preset libtorch
    """
    from doctor.emit import emit_to, find_install
    from doctor.errors import UsageError
    from doctor.host import Host

    if shell and fmt != "setenv":
        raise UsageError("--shell only applies to setenv", f"drop --shell, or use `doctor emit setenv --shell {shell}`")
    if nixpkgs_libtorch and fmt != "nix":
        raise UsageError("--nixpkgs-libtorch only applies to nix", "use `doctor emit nix --nixpkgs-libtorch`")
    host = Host.from_system()
    install = find_install(host, root)
    options = {"nixpkgs_libtorch": True} if nixpkgs_libtorch else {}
    text, messages = emit_to(fmt, host, install, output, shell, **options)
    if fmt == "setenv" and shell is None:
        from doctor.emit.setenv import default_shell, unwritten_shell

        if (unknown := unwritten_shell(host)) is not None:
            messages.append(f"note: $SHELL is {unknown[:40]}, which setenv does not write "
                            f"for; this is {default_shell(host)} syntax (choose with --shell {'|'.join(SHELLS)})")
    click.echo(text, nl=False)
    for line in messages:
        say(line)
    return 0
