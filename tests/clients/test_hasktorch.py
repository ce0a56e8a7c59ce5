"""Hasktorch's Setup.hs rules (hasktorch 7395e0b): LIBTORCH_HOME / VERSION / CUDA_VERSION /
SKIP_DOWNLOAD choose the cached tree; a requested tree not cached is a finding."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from testsupport.support import doctor_subprocess, make_tree

from doctor.check import build_areas, gather_facts
from doctor.host import Host
from doctor.probe.hasktorch_cache import hasktorch_request, libtorch_home


def clients(host):
    facts = gather_facts(host)
    return facts, [f for a in build_areas(facts, host) if a.name == "clients" for f in a.findings]


def cache(tmp_path, abi_libs, version, flavour="cpu", home="home/user/.cache/libtorch", ok=True):
    tree = make_tree(tmp_path / home / version / "linux-x86_64" / flavour, version, flavour, libc10=abi_libs["cxx11"])
    if ok:
        (tree / ".ok").write_text("")
    return tree


def test_home_defaults_and_overrides(tmp_path):
    assert str(libtorch_home(Host.for_test(tmp_path, {}))) == "/home/user/.cache/libtorch"
    assert str(libtorch_home(Host.for_test(tmp_path, {"XDG_CACHE_HOME": "/xdg"}))) == "/xdg/libtorch"
    assert str(libtorch_home(Host.for_test(tmp_path, {"XDG_CACHE_HOME": "relative"}))) == "/home/user/.cache/libtorch"
    assert str(libtorch_home(Host.for_test(tmp_path, {"LIBTORCH_HOME": "/lt", "XDG_CACHE_HOME": "/xdg"}))) == "/lt"


def test_requested_tree_defaults_to_setup_hs(tmp_path):
    r = hasktorch_request(Host.for_test(tmp_path, {}))
    assert (r.version, r.flavour, r.version_from_env) == ("2.9.1", "cpu", False)
    assert r.tree == "/home/user/.cache/libtorch/2.9.1/linux-x86_64/cpu" and not r.cached
    r = hasktorch_request(Host.for_test(tmp_path, {"LIBTORCH_VERSION": "../x"}))
    assert r.tree is None  # not a path component


def test_version_not_cached_is_a_finding_and_not_silently_the_other(tmp_path, abi_libs):
    cache(tmp_path, abi_libs, "2.13.0")
    host = Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.9.1"})
    facts, found = clients(host)
    nc = [f for f in found if f.id == "hasktorch.not-cached"]
    assert nc and nc[0].fix == "doctor fetch-libtorch --version 2.9.1 --variant cpu"
    assert "NOT cached" in facts["libtorch"].active_reason


def test_cuda_flavour_chooses_that_tree(tmp_path, abi_libs):
    cache(tmp_path, abi_libs, "2.9.1", "cpu")
    cache(tmp_path, abi_libs, "2.9.1", "cu128")
    host = Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.9.1", "LIBTORCH_CUDA_VERSION": "cu128"})
    facts, found = clients(host)
    assert facts["libtorch"].active_install.root.endswith("/2.9.1/linux-x86_64/cu128") and found == []


def test_missing_ok_marker_is_not_cached(tmp_path, abi_libs):
    cache(tmp_path, abi_libs, "2.9.1", ok=False)
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.9.1"}))
    assert [f.id for f in found] == ["hasktorch.not-cached"]


def test_libtorch_home_and_skip_download(tmp_path, abi_libs):
    cache(tmp_path, abi_libs, "2.9.1", home="srv/lt")
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_HOME": "/srv/lt", "LIBTORCH_VERSION": "2.9.1"}))
    assert found == []
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.5.0", "LIBTORCH_SKIP_DOWNLOAD": ""}))
    assert found == []  # Setup.hs then assumes a global libtorch: no cache lookup at all
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.5.0", "NIX_BUILD_TOP": "/build/x"}))
    assert found == []


def test_stale_cargo_target_built_against_cuda(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/cpu", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    make_tree(tmp_path / "opt/cuda", "2.11.0", "cu128", libc10=abi_libs["cxx11"], cuda=True)
    out = tmp_path / "work/target/debug/build/torch-sys-0123abcd/output"
    out.parent.mkdir(parents=True)
    out.write_text("cargo:rustc-link-search=native=/opt/cuda/lib\ncargo:rustc-link-lib=static=tch\n"
                   "cargo:rustc-link-lib=torch_cuda\ncargo:rustc-link-lib=torch_cpu\n")
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/cpu"}))
    st = [f for f in found if f.id == "build.stale-variant"]
    assert st and st[0].fix == "cargo clean" and "/opt/cuda/lib (CUDA)" in st[0].title
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/cuda"}))
    assert [f for f in found if f.id == "build.stale-variant"] == []


def test_stale_dist_newstyle_configured_against_another_tree(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/cpu", "2.9.1", "cpu", libc10=abi_libs["cxx11"])
    make_tree(tmp_path / "opt/cuda", "2.9.1", "cu128", libc10=abi_libs["cxx11"], cuda=True)
    config = tmp_path / "work/dist-newstyle/build/x86_64-linux/ghc-9.0.2/app-0.1/x/app/setup-config"
    config.parent.mkdir(parents=True)
    # Cabal's Binary encoding: an 8-byte length, the characters, the next field's length.
    path = b"/opt/cuda/lib"
    config.write_bytes(b"Saved package config for app-0.1\n\x00\x00\x00\x00\x00\x00\x00\x0d" + path
                       + b"\x00\x00\x00\x00\x00\x00\x00\x01")
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/cpu"}))
    st = [f for f in found if f.id == "build.stale-variant"]
    assert st and "/opt/cuda/lib (CUDA)" in st[0].title and st[0].fix.startswith("rm -rf dist-newstyle")
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/cuda"}))
    assert [f for f in found if f.id == "build.stale-variant"] == []


# getLocalUserLibtorchDir's lines from libtorch-ffi's Setup.hs, run by the real GHC from a "package
# folder": where it looks for the tree, as an absolute path.
SETUP_HS_LOOKUP = """
import System.Directory (makeAbsolute)
import System.Environment (lookupEnv)
import System.FilePath ((</>))
main = do
  Just h <- lookupEnv "LIBTORCH_HOME"
  makeAbsolute (h </> "2.9.1" </> "linux-x86_64" </> "cpu") >>= putStrLn
"""


def from_bash(assignment: str) -> str:
    return subprocess.run(["bash", "-c", f"export {assignment}; printf %s \"$LIBTORCH_HOME\""], capture_output=True,
                          text=True, check=True, env={"HOME": "/home/user", "PATH": "/usr/bin:/bin"}).stdout


@pytest.mark.parametrize("assignment, looks_in", [
    ('LIBTORCH_HOME="~/x"', "pkg/~/x/2.9.1/linux-x86_64/cpu"),  # quoted: the ~ stays
    ("LIBTORCH_HOME=", "pkg/2.9.1/linux-x86_64/cpu"),  # empty is not unset
    ("LIBTORCH_HOME=cache/lt", "pkg/cache/lt/2.9.1/linux-x86_64/cpu"),
])
def test_a_home_setup_hs_resolves_from_its_own_folder_is_a_finding(tmp_path, assignment, looks_in):
    ghc = shutil.which("runghc")
    if ghc is None:
        pytest.fail("runghc (ghc) is needed for this test: run scripts/test")
    value = from_bash(assignment)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "lookup.hs").write_text(SETUP_HS_LOOKUP)
    seen = subprocess.run([ghc, str(tmp_path / "lookup.hs")], cwd=tmp_path / "pkg", capture_output=True, text=True,
                          env={"LIBTORCH_HOME": value, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=300)
    assert seen.stdout.strip() == str(tmp_path / looks_in), seen.stderr
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_HOME": value, "LIBTORCH_VERSION": "2.9.1"}))
    assert [f.id for f in found] == ["hasktorch.relative-home"]  # not also hasktorch.not-cached: no one folder
    fix = found[0].fix
    if value.startswith("~"):
        assert fix == "export LIBTORCH_HOME=/home/user/x"
    elif value:
        assert fix == "export LIBTORCH_HOME=/work/cache/lt"  # the folder it names from here (the test host's cwd)
    else:
        assert fix.startswith("unset LIBTORCH_HOME")


def test_an_absolute_or_expanded_home_is_no_finding(tmp_path):
    for value in (from_bash("LIBTORCH_HOME=~/x"), "/srv/lt"):
        assert value.startswith("/")
        _, found = clients(Host.for_test(tmp_path, {"LIBTORCH_HOME": value}))
        assert "hasktorch.relative-home" not in [f.id for f in found]


def test_fetch_refuses_a_home_with_a_literal_tilde(tmp_path):
    """It would make a folder named ~ in the current folder, the one a later `rm -rf ~` goes wrong on."""
    got = doctor_subprocess("fetch-libtorch", "--dry-run", "--version", "2.9.1", "--variant", "cpu", cwd=tmp_path,
                            env={"LIBTORCH_HOME": from_bash('LIBTORCH_HOME="~/x"'), "HOME": str(tmp_path / "home")})
    assert got.returncode == 2 and list(tmp_path.iterdir()) == []
    assert got.stderr == ("error: LIBTORCH_HOME='~/x' keeps its ~ (only a shell expands ~, and only unquoted at the start "
                          "of a word): the install would make a folder named ~ here\n"
                          f"hint: export LIBTORCH_HOME={tmp_path}/home/x\n")
    got = doctor_subprocess("fetch-libtorch", "--dry-run", "--version", "2.9.1", "--variant", "cpu", cwd=tmp_path,
                            env={"LIBTORCH_HOME": "rel", "HOME": str(tmp_path / "home")})
    assert got.returncode == 0 and f"installed under {tmp_path}/rel/2.9.1/linux-x86_64/cpu" in got.stdout
