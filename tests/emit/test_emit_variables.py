"""The variable list every format renders, and `apply`, the reference meaning of sourcing it."""

from __future__ import annotations

from testsupport.emit_helpers import fake_install
from hypothesis import given
from hypothesis import strategies as st

from doctor.emit.variables import Var, apply, variables

ROOT = "/opt/lib torch/libtorch"


def by_name(vars: list[Var]) -> dict[str, Var]:
    return {v.name: v for v in vars}


def test_linux_variables_name_both_include_dirs_lib_dir_and_abi():
    v = by_name(variables(fake_install(ROOT), "Linux"))
    assert v["LIBTORCH"] == Var("LIBTORCH", ROOT, "set")
    # tch-rs appends include/ and lib/ itself: these are prefixes, not the dirs.
    assert v["LIBTORCH_INCLUDE"].value == ROOT and v["LIBTORCH_LIB"].value == ROOT
    assert v["LIBTORCH_CXX11_ABI"].value == "1"
    assert v["Torch_DIR"].value == f"{ROOT}/share/cmake/Torch"
    assert v["CMAKE_PREFIX_PATH"] == Var("CMAKE_PREFIX_PATH", ROOT, "prepend")
    assert v["CPLUS_INCLUDE_PATH"].elements() == [f"{ROOT}/include", f"{ROOT}/include/torch/csrc/api/include"]
    assert v["LIBRARY_PATH"].value == v["LD_LIBRARY_PATH"].value == f"{ROOT}/lib"
    assert "LIBTORCH_HOME" not in v and "DYLD_LIBRARY_PATH" not in v and "PATH" not in v


def test_old_abi_is_zero_and_unknown_abi_is_left_out():
    assert by_name(variables(fake_install(ROOT, abi="pre-cxx11")))["LIBTORCH_CXX11_ABI"].value == "0"
    assert "LIBTORCH_CXX11_ABI" not in by_name(variables(fake_install(ROOT, abi=None)))


def test_split_install_gives_tch_the_parents_of_include_and_lib():
    install = fake_install("/usr")
    install.include_dirs = ["/usr/include/torch-2", "/usr/include/torch-2/torch/csrc/api/include"]
    install.lib_dir = "/usr/lib/x86_64-linux-gnu"
    v = by_name(variables(install))
    assert v["LIBTORCH_INCLUDE"].value == "/usr/include" and v["LIBTORCH_LIB"].value == "/usr/lib"


def test_hasktorch_layout_adds_its_variables():
    root = "/home/u/.cache/libtorch/2.13.0/linux-x86_64/cu130"
    h = {"home": "/home/u/.cache/libtorch", "version": "2.13.0", "platform": "linux-x86_64", "flavour": "cu130", "ok": True}
    v = by_name(variables(fake_install(root, hasktorch=h, variant="cu130")))
    assert v["LIBTORCH_HOME"].value == "/home/u/.cache/libtorch"
    assert v["LIBTORCH_VERSION"].value == "2.13.0"
    assert v["LIBTORCH_CUDA_VERSION"].value == "cu130"
    assert v["LIBTORCH_SKIP_DOWNLOAD"].value == "1"


def test_macos_uses_dyld_and_no_abi():
    v = by_name(variables(fake_install("/opt/libtorch", abi=None), "Darwin"))
    assert v["DYLD_LIBRARY_PATH"].value == "/opt/libtorch/lib"
    assert "LD_LIBRARY_PATH" not in v and "LIBTORCH_CXX11_ABI" not in v


def test_windows_uses_path_include_lib_and_semicolons():
    root = "C:\\libtorch"
    v = by_name(variables(fake_install(root, abi=None, system="Windows"), "Windows"))
    assert v["PATH"].value == "C:\\libtorch\\lib"
    assert v["INCLUDE"].value == "C:\\libtorch\\include;C:\\libtorch\\include\\torch\\csrc\\api\\include"
    assert v["INCLUDE"].elements("Windows") == ["C:\\libtorch\\include", "C:\\libtorch\\include\\torch\\csrc\\api\\include"]
    assert v["Torch_DIR"].value == "C:\\libtorch\\share\\cmake\\Torch"
    assert "LD_LIBRARY_PATH" not in v and "CPLUS_INCLUDE_PATH" not in v


def test_apply_moves_ours_first_drops_empties_and_copies():
    vars = [Var("LD_LIBRARY_PATH", "/t/lib", "prepend"), Var("LIBTORCH", "/t", "set")]
    env = {"LD_LIBRARY_PATH": "/a::/t/lib:/b:", "LIBTORCH": "/old"}
    after = apply(vars, env)
    assert after["LD_LIBRARY_PATH"] == "/t/lib:/a:/b"
    assert after["LIBTORCH"] == "/t"
    assert apply(vars, {})["LD_LIBRARY_PATH"] == "/t/lib"
    assert env["LD_LIBRARY_PATH"] == "/a::/t/lib:/b:"  # the input is not touched


elements = st.text(alphabet=st.characters(blacklist_characters=":\0", blacklist_categories=("Cs",)), max_size=6)


@given(st.lists(elements, max_size=6), st.lists(elements.filter(bool), min_size=1, max_size=3))
def test_apply_is_idempotent_and_never_leaves_an_empty_element(existing, ours):
    vars = [Var("X_PATH", ":".join(ours), "prepend")]
    once = apply(vars, {"X_PATH": ":".join(existing)})
    assert apply(vars, once) == once
    parts = once["X_PATH"].split(":")
    assert "" not in parts
    assert parts[: len(dict.fromkeys(ours))] == list(dict.fromkeys(ours))
