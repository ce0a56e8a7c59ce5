"""Hasktorch's Setup.hs rules (hasktorch 7395e0b): LIBTORCH_HOME / VERSION / CUDA_VERSION /
SKIP_DOWNLOAD choose the cached tree; a requested tree not cached is a finding."""

from __future__ import annotations

from testsupport.support import make_tree

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
