"""The project's own nix/flake.nix: Nix parses it, and against a stub nixpkgs it builds torch-doctor
with the version and dependencies pyproject.toml names."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

from testsupport.support import REPO
from testsupport.emit_helpers import need, nix_env
from packaging.requirements import Requirement

FLAKE = REPO / "nix/flake.nix"


def test_project_flake_parses(tmp_path):
    out = subprocess.run([need("nix-instantiate"), "--store", "dummy://", "--parse", str(FLAKE)],
                         capture_output=True, text=True, timeout=30, env=nix_env(tmp_path))
    assert out.returncode == 0, out.stderr


def nixpkgs_name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def test_project_flake_builds_the_package_pyproject_describes(tmp_path):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["test"] + ["setuptools"]
    ps = {nixpkgs_name(r): f"py:{nixpkgs_name(r)}" for r in wanted}
    stub = f"""
let
  lib = {{
    genAttrs = names: f: builtins.listToAttrs (map (n: {{ name = n; value = f n; }}) names);
    toLower = s: builtins.replaceStrings
      [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ]
      [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ] s;
    replaceStrings = builtins.replaceStrings;
    fileset = {{ unions = xs: xs; toSource = {{ root, fileset }}: {{ inherit root; files = map toString fileset; }}; }};
  }};
  ps = builtins.fromJSON {json.dumps(json.dumps(ps))} // {{ buildPythonPackage = attrs: attrs; }};
  pkgs = {{
    inherit lib;
    python3 = {{ pkgs = ps; withPackages = f: {{ python-with = f ps; }}; }};
    mkShell = attrs: attrs;
    bash = "bash"; zsh = "zsh"; fish = "fish"; shellcheck = "shellcheck"; nix = "nix"; cmake = "cmake";
    gcc = "gcc"; zip = "zip"; unzip = "unzip";
  }};
  nixpkgs = {{ inherit lib; legacyPackages = lib.genAttrs [ "x86_64-linux" ] (s: pkgs); }};
  flake = import {FLAKE};
  self = flake.outputs {{ inherit self nixpkgs; }};
  package = self.packages.x86_64-linux.default;
in {{
  inherit (package) pname version dependencies build-system pythonImportsCheck;
  files = package.src.files;
  python = (builtins.head self.devShells.x86_64-linux.default.packages).python-with;
  hook = self.devShells.x86_64-linux.default.shellHook;
}}
"""
    (tmp_path / "eval.nix").write_text(stub)
    out = subprocess.run([need("nix-instantiate"), "--store", "dummy://", "--eval", "--strict", "--json",
                          str(tmp_path / "eval.nix")], capture_output=True, text=True, timeout=60, env=nix_env(tmp_path))
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["pname"] == project["name"] and got["version"] == project["version"]
    assert got["dependencies"] == [f"py:{nixpkgs_name(r)}" for r in project["dependencies"]]
    assert got["build-system"] == ["py:setuptools"]
    assert sorted(p.rsplit("/", 1)[-1] for p in got["files"]) == ["README.md", "doctor", "pyproject.toml", "torchfn"]
    test_deps = [f"py:{nixpkgs_name(r)}" for r in project["optional-dependencies"]["test"]]
    assert got["python"][1:] == test_deps and got["python"][0]["pname"] == project["name"]
    assert 'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"' in got["hook"]
