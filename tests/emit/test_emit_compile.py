"""The emitted environment alone builds and runs a C++ program against the torch wheel's libtorch."""

from __future__ import annotations

import subprocess

import pytest
from testsupport.emit_helpers import AWKWARD, clean_env, need

from doctor.emit import emit_text
from doctor.host import Host

PROGRAM = r"""
#include <c10/core/Device.h>
#include <iostream>
#include <string>
int main() {
  c10::Device device(std::string("cpu"));  // the symbol an ABI mismatch breaks at link time
  std::cout << device.str() << std::endl;
  return device.is_cpu() ? 0 : 1;
}
"""


@pytest.mark.slow
def test_program_builds_and_runs_with_only_the_emitted_environment(tmp_path, wheel_root):
    need("g++")
    # The wheel's tree, reached through a folder whose name has a space, quotes, `$` and a backslash.
    (tmp_path / AWKWARD).mkdir()
    root = tmp_path / AWKWARD / "torch"
    root.symlink_to(wheel_root, target_is_directory=True)
    host = Host.from_system()
    setenv = tmp_path / "setenv.sh"
    setenv.write_text(emit_text("setenv", root=root, host=host, shell="bash"))
    (tmp_path / "prog.cpp").write_text(PROGRAM)
    env = clean_env(tmp_path)

    def bash(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    # No -I, -L or rpath: only CPLUS_INCLUDE_PATH, LIBRARY_PATH and LD_LIBRARY_PATH from the file.
    built = bash(". ./setenv.sh && g++ -std=c++20 prog.cpp -o prog -lc10 && ./prog")
    assert built.returncode == 0, built.stderr
    assert built.stdout == "cpu\n"

    without_loader = bash("./prog")
    assert without_loader.returncode == 127
    assert "libc10.so: cannot open shared object file" in without_loader.stderr

    # And the environment is what made the headers visible in the first place.
    no_env = bash("g++ -std=c++20 -fsyntax-only prog.cpp")
    assert no_env.returncode != 0 and "c10/core/Device.h" in no_env.stderr
