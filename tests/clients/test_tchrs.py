"""tch-rs (torch-sys/build.rs at tch-rs a1dc7ec) resolution, case by case, on trees over a tmp root
with real libc10 ELF files of both ABIs."""

from __future__ import annotations

from testsupport.support import make_tree

from doctor.catalog.tch import TCH_LIBTORCH, libtorch_for
from doctor.check import build_areas, gather_facts
from doctor.host import Host
from doctor.probe.tchrs import cuda_device, read_cargo_lock, resolve_tch

LOCK = """version = 3

[[package]]
name = "tch"
version = "{v}"

[[package]]
name = "torch-sys"
version = "{v}"
"""


def clients(host):
    facts = gather_facts(host)
    return facts, [f for a in build_areas(facts, host) if a.name == "clients" for f in a.findings]


def test_libtorch_prefix_and_default_abi(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    t = resolve_tch(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt"}), None)
    assert (t.mode, t.lib_dir, t.cxx11_abi, t.abi_from) == ("LIBTORCH", "/opt/lt/lib", "1", "default")
    assert t.include_dirs == ["/opt/lt/include", "/opt/lt/include/torch/csrc/api/include"]
    assert t.checked_version == "2.11.0" and t.checked_from == "/opt/lt/build-version"
    assert t.include_ok and t.lib_ok and not t.static and not t.links_cuda


def test_system_usr_lib_when_libtorch_unset(tmp_path):
    (tmp_path / "usr/lib").mkdir(parents=True)
    (tmp_path / "usr/lib/libtorch.so").write_bytes(b"")
    t = resolve_tch(Host.for_test(tmp_path, {}), None)
    assert (t.mode, t.prefix, t.lib_dir) == ("system", "/usr", "/usr/lib")


def test_nothing_and_split_variables_alone_are_not_enough(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"LIBTORCH_LIB": "/opt/lt", "LIBTORCH_INCLUDE": "/opt/lt"})
    t = resolve_tch(host, None)
    assert t.mode == "none"
    _, found = clients(host)
    nf = [f for f in found if f.id == "libtorch.not-found"]
    assert nf and "LIBTORCH_INCLUDE / LIBTORCH_LIB alone are not enough" in nf[0].detail


def test_torch_cuda_version_is_normalised_like_build_rs():
    assert [cuda_device(v) for v in ("12.8", "cu128", " CU12.8.1 ", "11.8")] == ["cu128", "cu128", "cu128", "cu118"]


def test_use_pytorch_takes_the_python_tree_and_its_abi(tmp_path, abi_libs, wheel_root):
    from doctor.probe.python_torch import detect_python_torch

    host = Host.from_system()
    python = detect_python_torch(host)
    env = dict(host.env, LIBTORCH_USE_PYTORCH="1", LIBTORCH="/nowhere", LIBTORCH_CXX11_ABI="0")
    t = resolve_tch(Host(env=env, root=host.root, cwd=tmp_path, system=host.system, machine=host.machine,
                         sys_path=host.sys_path), python)
    assert t.mode == "pytorch" and t.lib_dir == str(wheel_root / "lib")
    assert t.python_interpreter == ("python" if "VIRTUAL_ENV" in env else "python3")
    assert t.abi_from == "python" and t.checked_version == "2.13.0"


def test_cxx11_abi_0_against_a_cxx11_tree_is_an_abi_mismatch(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_CXX11_ABI": "0"}))
    abi = [f for f in found if f.id == "abi.mismatch"]
    assert abi and "LIBTORCH_CXX11_ABI=0" in abi[0].title and "cxx11 build" in abi[0].title
    assert abi[0].fix == "unset LIBTORCH_CXX11_ABI"


def test_default_abi_against_a_pre_cxx11_tree_says_set_it_to_0(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["pre-cxx11"])
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "TORCH_CUDA_VERSION": "cu128"}))
    abi = [f for f in found if f.id == "abi.mismatch"]
    assert abi and abi[0].fix == "export LIBTORCH_CXX11_ABI=0" and "default 1" in abi[0].title


def test_matching_abi_is_quiet(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["pre-cxx11"])
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_CXX11_ABI": "0"}))
    assert found == []


def test_libtorch_lib_one_level_too_deep_names_lib_and_the_right_value(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_LIB": "/opt/lt/lib"})
    facts, found = clients(host)
    bad = [f for f in found if f.id == "libtorch.path-invalid"]
    assert [f.subject for f in bad] == ["LIBTORCH_LIB"]
    assert "one level too deep" in bad[0].title and bad[0].fix == "export LIBTORCH_LIB=/opt/lt"
    assert "does not exist" not in bad[0].title


def test_libtorch_include_one_level_too_deep_names_include(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_INCLUDE": "/opt/lt/include", "LIBTORCH_LIB": "/opt/lt"})
    _, found = clients(host)
    bad = [f for f in found if f.id == "libtorch.path-invalid"]
    assert [f.subject for f in bad] == ["LIBTORCH_INCLUDE"] and bad[0].fix == "export LIBTORCH_INCLUDE=/opt/lt"
    # the libtorch area does not blame LIBTORCH_LIB for it
    facts = gather_facts(host)
    all_ids = [(f.id, f.subject) for a in build_areas(facts, host) for f in a.findings]
    assert ("libtorch.path-invalid", "/opt/lt") not in all_ids


def test_cargo_lock_version_mismatch_notes_the_bypass(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (tmp_path / "work").mkdir()
    (tmp_path / "work/Cargo.lock").write_text(LOCK.format(v="0.23.0"))
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt"}))
    vm = [f for f in found if f.id == "version.mismatch"]
    assert vm and "torch-sys 0.23.0" in vm[0].title and "needs libtorch 2.10.0" in vm[0].title
    assert "LIBTORCH_BYPASS_VERSION_CHECK" in vm[0].detail and vm[0].level.name == "ERROR"
    assert "--version 2.10.0" in vm[0].fix
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_BYPASS_VERSION_CHECK": "1"}))
    vm = [f for f in found if f.id == "version.mismatch"]
    assert vm and vm[0].level.name == "WARNING" and "is set" in vm[0].detail


def test_cargo_lock_matching_version_and_explicit_path(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.10.0", "cpu", libc10=abi_libs["cxx11"])
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj/Cargo.lock").write_text(LOCK.format(v="0.23.0"))
    lock = read_cargo_lock(Host.for_test(tmp_path, {}), "/proj/Cargo.lock")
    assert (lock.tch, lock.torch_sys) == ("0.23.0", "0.23.0")
    facts = gather_facts(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt"}), cargo_lock="/proj/Cargo.lock")
    assert facts["tch_relevant"] and facts["tch"].crate.torch_sys == "0.23.0"
    _, found = clients(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt"}))
    assert found == []


def test_hostile_cargo_lock_is_not_a_crash(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "work/Cargo.lock").write_text("[[package]\nname = \"tch\"\x00")
    lock = read_cargo_lock(Host.for_test(tmp_path, {}))
    assert lock.tch is None and lock.torch_sys is None


def test_catalog_rows():
    assert libtorch_for("0.24.0") == "2.11.0" and libtorch_for("0.17.0") == "2.4.0" and libtorch_for("9.9.9") is None
    assert all(len(commit) >= 7 for _, commit in TCH_LIBTORCH.values())


def test_static_and_cuda_link(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cu128", libc10=abi_libs["cxx11"], cuda=True)
    for value, static in (("0", False), ("false", False), ("FALSE", False), ("1", True), ("yes", True)):
        t = resolve_tch(Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_STATIC": value}), None)
        assert t.static is static and t.links_cuda


def test_use_pytorch_chooses_the_python_tree_over_libtorch(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/lt", "2.11.0", "cpu", libc10=abi_libs["cxx11"])
    make_tree(tmp_path / "site/torch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (tmp_path / "site/torch/version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\nhip = None\n")
    host = Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt", "LIBTORCH_USE_PYTORCH": "1"}, sys_path=["/site"])
    facts = gather_facts(host)
    assert facts["libtorch"].active_install.root == "/site/torch"
    assert "LIBTORCH_USE_PYTORCH" in facts["libtorch"].active_reason
    assert facts["tch"].mode == "pytorch" and facts["tch"].lib_dir == "/site/torch/lib"
    host = Host.for_test(tmp_path, {"LIBTORCH": "/opt/lt"}, sys_path=["/site"])
    assert gather_facts(host)["libtorch"].active_install.root == "/opt/lt"
