"""Helpers for the emit tests: awkward paths, fake installs, real shells, a stub nixpkgs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from doctor.probe.libtorch import LibtorchInstall

# The faithful port of the Actions runner's env-file reader lives with the other runner code.
from testsupport.gha_runner import parse_env_file  # noqa: F401

# Every character a shell or a format could trip on, in one folder name.
AWKWARD = "lib torch \"dq\" 'sq' $HOME ${x} \\back"


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is needed for this test: run scripts/test (it installs the emit test tools)")
    return path


def fake_install(root: str, *, abi: str | None = "cxx11", variant: str = "cpu", version: str = "2.13.0",
                 record: dict | None = None, hasktorch: dict | None = None, origins=("--libtorch",),
                 system: str = "Linux") -> LibtorchInstall:
    sep = "\\" if system == "Windows" else "/"
    inc = f"{root}{sep}include"
    return LibtorchInstall(
        root=root, origins=list(origins), include_dirs=[inc, sep.join([inc, "torch", "csrc", "api", "include"])],
        lib_dir=f"{root}{sep}lib", exists=True, complete=True, version=version, variant=variant, abi=abi,
        record=record, hasktorch=hasktorch,
    )


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: no user rc files (HOME is a temp dir), no LIBTORCH* leaking in."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "LANG": "C.UTF-8"}
    env.update(extra)
    return env


def sourced_env(shell: str, script: Path, env: dict[str, str], times: int = 2, prelude: str = "") -> dict[str, str]:
    """The exported environment after `shell` sources `script` `times` times."""
    need(shell)
    env = dict(env, TD_FILE=str(script))
    if shell == "fish":
        argv = ["fish", "--no-config", "-c", prelude + "source $TD_FILE; " * times + "env -0"]
    else:
        flags = {"bash": ["--norc", "--noprofile"], "zsh": ["-f"]}.get(shell, [])
        argv = [shell, *flags, "-c", prelude + '. "$TD_FILE"; ' * times + "env -0"]
    out = subprocess.run(argv, env=env, capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stderr == b"", out.stderr.decode()
    pairs = [item.split("=", 1) for item in out.stdout.decode().split("\0") if item]
    return {k: v for k, v in pairs}


# -- a stub nixpkgs: just enough of lib and pkgs to evaluate a generated flake's outputs --

STUB_PKGS = r"""
{ system, config ? {} }:
let
  lib = import ./lib.nix;
  isDarwin = builtins.match ".*-darwin" system != null;
in {
  inherit lib;
  stdenv = { cc.cc.lib = "/nix/store/stub-gcc-lib"; hostPlatform = { inherit isDarwin; }; };
  fetchzip = args:
    assert builtins.attrNames (removeAttrs args [ "stripRoot" ]) == [ "hash" "name" "url" ];
    assert builtins.isBool (args.stripRoot or true);
    assert builtins.match "sha256-[A-Za-z0-9+/]{43}=" args.hash != null;
    # store names: [A-Za-z0-9+._?=-], not starting with '.'; '%' (from %2B) is the usual trap
    assert builtins.match "[A-Za-z0-9+_?=-][A-Za-z0-9+._?=-]*" args.name != null;
    { outPath = "/nix/store/stub-" + args.name; fetched = args; };
  mkShell = attrs: attrs;
  libtorch-bin = {
    outPath = "/nix/store/stub-libtorch-bin" + (if config.cudaSupport or false then "-cuda" else "");
    dev = { outPath = "/nix/store/stub-libtorch-bin-dev"; };
  };
}
"""

STUB_LIB = r"""
{
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  concatStringsSep = builtins.concatStringsSep;
  getDev = p: p.dev;
}
"""

STUB_EVAL = r"""
let
  flake = import ./flake.nix;
  nixpkgs = {
    lib = import ./stub/lib.nix;
    legacyPackages = nixpkgs.lib.genAttrs [ "x86_64-linux" "aarch64-linux" "aarch64-darwin" "x86_64-darwin" ]
      (system: import ./stub/pkgs.nix { inherit system; });
    outPath = ./stub;  # `import nixpkgs { ... }` reads stub/default.nix
  };
  self = flake.outputs { inherit self nixpkgs; };
in {
  inputs = flake.inputs;
  devShells = builtins.mapAttrs (system: shells: shells.default) self.devShells;
  packages = builtins.mapAttrs (system: p: { libtorch = "${p.libtorch}"; default = "${p.default}"; fetched = p.libtorch.fetched or null; }) self.packages;
}
"""


def eval_flake(flake_text: str, workdir: Path) -> dict:
    """Evaluate the flake's outputs against the stub nixpkgs; the devShells' attributes as JSON."""
    need("nix-instantiate")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "stub").mkdir(exist_ok=True)
    (workdir / "stub/pkgs.nix").write_text(STUB_PKGS)
    (workdir / "stub/lib.nix").write_text(STUB_LIB)
    (workdir / "stub/default.nix").write_text("args: import ./pkgs.nix args\n")
    (workdir / "flake.nix").write_text(flake_text)
    (workdir / "eval.nix").write_text(STUB_EVAL)
    out = subprocess.run(
        ["nix-instantiate", "--store", "dummy://", "--eval", "--strict", "--json", str(workdir / "eval.nix")],
        capture_output=True, text=True, timeout=60, env=nix_env(workdir),
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def nix_env(workdir: Path) -> dict[str, str]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "NIX_REMOTE": "dummy://",
            "XDG_CACHE_HOME": str(home / "cache"), "NIX_CONFIG": "experimental-features ="}


def nix_parse(flake_text: str, workdir: Path) -> subprocess.CompletedProcess:
    need("nix-instantiate")
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "parse.nix"
    path.write_text(flake_text)
    return subprocess.run(["nix-instantiate", "--store", "dummy://", "--parse", str(path)], capture_output=True,
                          text=True, timeout=30, env=nix_env(workdir))
