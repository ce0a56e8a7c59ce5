"""cabal, cargo, CMake and GitHub outputs: they parse, carry the right paths, and the preset configures."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib

import pytest
from click.testing import CliRunner
from testsupport.support import doctor_subprocess, make_tree
from testsupport.emit_helpers import AWKWARD, clean_env, fake_install, need, parse_env_file

from doctor.commands.emit import command
from doctor.emit import emit_text
from doctor.emit.variables import apply, variables
from doctor.errors import DoctorError
from doctor.host import Host

ROOT = "/opt/" + AWKWARD + "/libtorch"


def cabal_fields(text: str) -> dict[str, dict[str, list[str]]]:
    """package stanza -> field -> values, reading quoted values as Haskell string literals."""
    stanzas: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("--"):
            continue
        if m := re.fullmatch(r"package (\S+)", line):
            current = stanzas.setdefault(m[1], {})
            continue
        m = re.fullmatch(r"  ([a-z-]+): (.*)", line)
        assert m and current is not None, f"unexpected cabal line {line!r}"
        values = [json.loads(q) for q in re.findall(r'"(?:[^"\\]|\\.)*"', m[2])] or [m[2]]
        current.setdefault(m[1], []).extend(values)
    return stanzas


def test_cabal_fragment_names_both_include_dirs_and_the_lib_dir():
    install = fake_install(ROOT)
    fields = cabal_fields(emit_text("cabal", install=install, host=Host(env={})))
    assert fields["libtorch-ffi"]["extra-include-dirs"] == [f"{ROOT}/include", f"{ROOT}/include/torch/csrc/api/include"]
    assert fields["libtorch-ffi"]["extra-lib-dirs"] == [f"{ROOT}/lib"]
    assert fields["*"]["shared"] == ["True"] and fields["*"]["executable-dynamic"] == ["True"]


def test_cargo_config_is_toml_with_tch_variables():
    install = fake_install(ROOT + "\x7f")
    host = Host(env={"LD_LIBRARY_PATH": "/cuda/lib64"})
    env = tomllib.loads(emit_text("cargo", install=install, host=host))["env"]
    assert env["LIBTORCH"] == install.root
    assert env["LIBTORCH_INCLUDE"] == env["LIBTORCH_LIB"] == install.root
    assert env["LIBTORCH_CXX11_ABI"] == "1"
    assert env["LD_LIBRARY_PATH"] == {"value": f"{install.root}/lib:/cuda/lib64", "force": True}


def test_cargo_config_link_args_rpath_and_cuda_no_as_needed():
    cpu = tomllib.loads(emit_text("cargo", install=fake_install(ROOT), host=Host(env={})))
    assert cpu["build"]["rustflags"] == ["-L", f"native={ROOT}/lib", "-C", f"link-arg=-Wl,-rpath,{ROOT}/lib"]
    gpu_install = fake_install(ROOT, variant="cu130")
    gpu_install.libraries = ["libc10.so", "libtorch.so", "libtorch_cuda.so"]
    flags = tomllib.loads(emit_text("cargo", install=gpu_install, host=Host(env={})))["build"]["rustflags"]
    assert flags[-6:] == ["-C", "link-arg=-Wl,--no-as-needed", "-C", "link-arg=-ltorch_cuda", "-C", "link-arg=-Wl,--as-needed"]


def test_a_comma_in_the_lib_dir_goes_to_the_linker_as_one_word():
    """cc splits `-Wl,` at commas: cargo gets one link-arg, GHC one -optl, per -Xlinker word
    (the real links: tests/clients/test_client_builds.py, `*_in_a_folder_named_with_a_comma`)."""
    root = "/opt/comma,dir/libtorch"
    flags = tomllib.loads(emit_text("cargo", install=fake_install(root), host=Host(env={})))["build"]["rustflags"]
    assert flags == ["-L", f"native={root}/lib", "-C", "link-arg=-Xlinker", "-C", "link-arg=-rpath",
                     "-C", "link-arg=-Xlinker", "-C", f"link-arg={root}/lib"]
    fields = cabal_fields(emit_text("cabal", install=fake_install(root), host=Host(env={})))
    assert fields["*"]["ghc-options"] == ["-optl-Xlinker", "-optl-rpath", "-optl-Xlinker", f"-optl{root}/lib"]
    plain = cabal_fields(emit_text("cabal", install=fake_install(ROOT), host=Host(env={})))
    assert plain["*"]["ghc-options"] == [f"-optl-Wl,-rpath,{ROOT}/lib"]


@pytest.mark.parametrize("fmt", ["cabal", "cargo"])
@pytest.mark.parametrize("odd, what", [("a:b", "':'"), ("$ORIGIN", "'$ORIGIN'"), ("x${LIB}y", "'${LIB}'"),
                                       ("$PLATFORM.d", "'$PLATFORM'")])
def test_a_path_the_loader_would_split_or_expand_in_an_rpath_is_refused(fmt, odd, what):
    """RUNPATH is a ':'-list and ld.so replaces $ORIGIN, $LIB, $PLATFORM in it: no rpath reads back."""
    with pytest.raises(DoctorError) as err:
        emit_text(fmt, install=fake_install(f"/opt/{odd}/libtorch"), host=Host(env={}))
    assert err.value.id == "emit.unrepresentable" and f"contains {what}" in err.value.message
    assert "move or link the libtorch tree" in err.value.hint


def test_a_lib_dir_holding_a_loader_token_is_refused_for_the_loader_path(tmp_path, wheel_root):
    """ld.so replaces $LIB in LD_LIBRARY_PATH as in RUNPATH (a program started with the tree's lib
    dir on it, here for real, does not find libc10.so), so setenv refuses such a path as it does ':'."""
    import shutil

    tree = make_tree(tmp_path / "$LIB" / "lt")
    shutil.copy(wheel_root / "lib/libc10.so", tree / "lib/libc10.so")
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "needs-c10"
    subprocess.run(["gcc", "-o", str(exe), str(tmp_path / "main.c"), "-Wl,--no-as-needed", f"-L{tree / 'lib'}", "-lc10"],
                   check=True)
    ran = subprocess.run([str(exe)], capture_output=True, text=True, env={"LD_LIBRARY_PATH": str(tree / "lib")})
    assert ran.returncode == 127 and "libc10.so: cannot open shared object file" in ran.stderr
    got = doctor_subprocess("emit", "setenv", "--libtorch", str(tree))
    assert got.returncode == 1 and got.stdout == ""
    assert got.stderr.startswith(f"error: the path {tree}/lib contains '$LIB', which ld.so replaces in LD_LIBRARY_PATH")


def test_a_dollar_the_loader_keeps_is_carried():
    root = "/opt/$LIBRARY/$HOME/libtorch"  # not a name ld.so replaces
    fields = cabal_fields(emit_text("cabal", install=fake_install(root), host=Host(env={})))
    assert fields["*"]["ghc-options"] == [f"-optl-Wl,-rpath,{root}/lib"]


def test_cmake_preset_is_json_with_torch_dir_and_abi():
    doc = json.loads(emit_text("cmake", install=fake_install(ROOT.replace("${x}", "")), host=Host(env={})))
    preset = doc["configurePresets"][0]
    assert preset["name"] == "libtorch"
    assert preset["cacheVariables"]["Torch_DIR"].endswith("/libtorch/share/cmake/Torch")
    assert preset["cacheVariables"]["CMAKE_CXX_FLAGS"] == "-D_GLIBCXX_USE_CXX11_ABI=1"


def test_cmake_refuses_a_path_a_preset_would_expand():
    with pytest.raises(DoctorError, match="macro") as err:
        emit_text("cmake", install=fake_install("/opt/${x}/back\\slash/libtorch"), host=Host(env={}))
    # the path as it is (the renderer escapes what must be), not a Python repr doubling the backslash
    assert err.value.message.startswith("/opt/${x}/back\\slash/libtorch/share/cmake/Torch looks like")


def test_cmake_preset_configures_find_package_torch_with_no_flags(tmp_path, wheel_root):
    need("cmake")
    awkward = tmp_path / "we ird 'q' $x é"  # the preset is UTF-8 text: é is written as is
    awkward.mkdir()
    (awkward / "torch").symlink_to(wheel_root, target_is_directory=True)
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.21)\nproject(probe CXX)\nfind_package(Torch REQUIRED)\n"
        'message(STATUS "torch-doctor-found ${TORCH_LIBRARIES}")\n')
    got = doctor_subprocess("emit", "cmake", "--libtorch", str(awkward / "torch"), "-o", str(project / "CMakeUserPresets.json"))
    assert got.returncode == 0, got.stderr
    out = subprocess.run(["cmake", "--preset", "libtorch"], cwd=project, env=clean_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"torch-doctor-found torch;torch_library;{awkward}/torch/lib/libc10.so" in out.stdout


def test_cmake_refuses_a_path_that_is_not_utf8(tmp_path, wheel_root):
    """A folder name holding the byte 0xff: JSON escaped as "\\udcff", CMake read it as the bytes
    ED B3 BF and looked in a folder that does not exist. Refused, as cabal and cargo refuse it."""
    import os

    odd = tmp_path / os.fsdecode(b"t\xfforch")
    odd.symlink_to(wheel_root, target_is_directory=True)
    out = tmp_path / "CMakeUserPresets.json"
    got = doctor_subprocess("emit", "cmake", "--libtorch", str(odd), "-o", str(out))
    assert got.returncode == 1, got.stderr
    assert "is not valid UTF-8, which the cmake format cannot carry" in got.stderr
    assert not out.exists()


def test_github_appends_to_github_env_and_path(tmp_path):
    root = make_tree(tmp_path / "lt", "2.13.0", "cpu", abi_line="1")
    gh_env, gh_path = tmp_path / "github_env", tmp_path / "github_path"
    gh_env.write_text("EARLIER=1\n")
    got = doctor_subprocess("emit", "github", "--libtorch", str(root),
                            env={"GITHUB_ENV": str(gh_env), "GITHUB_PATH": str(gh_path), "LD_LIBRARY_PATH": "/cuda/lib64"})
    assert got.returncode == 0, got.stderr
    assert got.stdout == "" and "$GITHUB_ENV" in got.stderr
    values = parse_env_file(gh_env.read_text())
    assert values.pop("EARLIER") == "1"
    assert values["LIBTORCH"] == str(root)
    assert values["LD_LIBRARY_PATH"] == f"{root}/lib:/cuda/lib64"
    assert not gh_path.exists() or gh_path.read_text() == ""  # PATH is the loader's only on Windows


def test_github_on_windows_puts_the_lib_dir_on_github_path():
    install = fake_install("C:\\libtorch", system="Windows", abi=None)
    host = Host(env={"PATH": "C:\\Windows"}, system="Windows")
    text = emit_text("github", install=install, host=host)
    env_part, path_part = text.split("# for $GITHUB_PATH\n")
    assert path_part == "C:\\libtorch\\lib\n"
    values = parse_env_file(env_part.split("# for $GITHUB_ENV\n", 1)[1])
    assert "PATH" not in values and values["INCLUDE"].startswith("C:\\libtorch\\include;")


def test_cli_writes_output_file_and_rejects_misplaced_options(tmp_path):
    root = make_tree(tmp_path / "lt", "2.13.0", "cpu", abi_line="1")
    runner = CliRunner()
    out = tmp_path / "sub/setenv.fish"
    result = runner.invoke(command, ["setenv", "--shell", "fish", "--libtorch", str(root), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "set -gx LIBTORCH " in text and str(root) in text
    result = runner.invoke(command, ["cabal", "--shell", "bash", "--libtorch", str(root)])
    assert result.exit_code != 0 and "--shell only applies to setenv" in str(result.exception)
    bad = doctor_subprocess("emit", "cabal", "--shell", "bash", "--libtorch", str(root))
    assert bad.returncode == 2 and "--shell only applies to setenv" in bad.stderr
    missing = doctor_subprocess("emit", "setenv", "--libtorch", str(tmp_path / "nope"))
    assert missing.returncode == 1 and f"--libtorch {tmp_path / 'nope'} does not exist" in missing.stderr
    (tmp_path / "file").write_text("x")
    a_file = doctor_subprocess("emit", "setenv", env={"LIBTORCH": str(tmp_path / "file")})
    assert a_file.returncode == 1 and f"LIBTORCH={tmp_path / 'file'} is a file, not a directory" in a_file.stderr
    wrong = doctor_subprocess("emit", "yaml")
    assert wrong.returncode == 2


def test_cli_default_shell_is_taken_from_SHELL(tmp_path):
    root = make_tree(tmp_path / "lt", "2.13.0", "cpu", abi_line="1")
    got = doctor_subprocess("emit", "setenv", "--libtorch", str(root), env={"SHELL": "/usr/bin/fish"})
    assert got.returncode == 0 and "set -gx LIBTORCH" in got.stdout
    assert apply(variables(fake_install(str(root))), {})["LIBTORCH"] == str(root)


def test_libtorch_in_hasktorch_cache_layout_gets_hasktorch_variables(tmp_path):
    home = tmp_path / "cache dir/libtorch"
    root = make_tree(home / "2.13.0/linux-x86_64/cu130", "2.13.0", "cu130", abi_line="1", cuda=True)
    (root / ".ok").write_text("")
    got = doctor_subprocess("emit", "setenv", "--shell", "sh", "--libtorch", str(root))
    assert got.returncode == 0, got.stderr
    assert f"export LIBTORCH_HOME='{home}'" in got.stdout
    assert "export LIBTORCH_VERSION='2.13.0'" in got.stdout and "export LIBTORCH_CUDA_VERSION='cu130'" in got.stdout
    assert "export LIBTORCH_SKIP_DOWNLOAD='1'" in got.stdout
    (root / ".ok").unlink()  # without the marker it is just a folder
    assert "LIBTORCH_HOME" not in doctor_subprocess("emit", "setenv", "--shell", "sh", "--libtorch", str(root)).stdout
