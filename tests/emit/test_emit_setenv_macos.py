"""macOS setenv: DYLD_LIBRARY_PATH with the SIP caveat and rpath advice, sourced by real shells."""

from __future__ import annotations

from testsupport.emit_helpers import AWKWARD, fake_install, sourced_env

from doctor.emit.setenv import render
from doctor.emit.variables import apply, variables
from doctor.host import Host


def test_mac_sh_sets_dyld_and_says_sip_and_rpath(tmp_path):
    root = f"/Users/me/{AWKWARD}/libtorch"
    install = fake_install(root, abi=None, system="Darwin")
    text = render(install, Host(env={}, system="Darwin"), "bash")
    assert "System Integrity Protection strips DYLD_*" in text
    assert f"#   CMake: set(CMAKE_BUILD_RPATH \"{root}/lib\") and set(CMAKE_INSTALL_RPATH \"{root}/lib\")" in text
    assert f"#   a built program: install_name_tool -add_rpath {root}/lib <program>" in text
    script = tmp_path / "setenv.sh"
    script.write_text(text)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DYLD_LIBRARY_PATH": "/opt/x::" + root + "/lib"}
    got = sourced_env("bash", script, env, times=2)
    want = apply(variables(install, "Darwin"), env, "Darwin")
    assert got["DYLD_LIBRARY_PATH"] == want["DYLD_LIBRARY_PATH"] == f"{root}/lib:/opt/x"
    assert "LD_LIBRARY_PATH" not in got and "LIBTORCH_CXX11_ABI" not in got


def test_mac_notes_in_fish_and_pwsh_but_not_on_linux():
    install = fake_install("/Users/me/libtorch", abi=None, system="Darwin")
    for shell in ("fish", "pwsh"):
        assert "# DYLD_LIBRARY_PATH. What works everywhere is an rpath" in render(install, Host(env={}, system="Darwin"), shell)
    linux = fake_install("/opt/libtorch")
    assert "System Integrity Protection" not in render(linux, Host(env={}, system="Linux"), "sh")


def test_newline_in_a_mac_path_stays_in_its_comment(tmp_path):
    root = "/Users/me/a\nb/libtorch"
    text = render(fake_install(root, abi=None, system="Darwin"), Host(env={}, system="Darwin"), "sh")
    assert "-rpath,/Users/me/a\\x0ab/libtorch/lib" in text
    assert all(line.startswith("#") or not line.startswith(("  CMake", "  link")) for line in text.splitlines())
