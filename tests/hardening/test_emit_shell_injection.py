"""Threat: a libtorch path (or an inherited LD_LIBRARY_PATH) holding shell syntax or control bytes
turns `eval "$(doctor emit setenv)"` into code, or reaches the variable changed.

Real shells run the real command line: bash, zsh and dash `eval "$(python -m doctor emit setenv …)"`,
fish pipes it to `source`; the variables are read back as bytes (`env -0`) and compared exactly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testsupport.support import REPO, make_tree

# ESC (a whole colour sequence, which click would strip from text output), other control bytes,
# shell syntax that must stay text, both quotes, a backslash before the closing quote, a newline,
# and bytes that are not UTF-8.
HOSTILE = os.fsdecode(b"lt \x1b[31mred\x1b[0m \x01\x7f\t $(touch PWNED) `touch PWNED` ${HOME} \"dq\" 'sq' nl\nx \xff\xfe end\\")


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is needed for this test: run scripts/test (it installs the shells)")
    return path


def shell_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    env.update(extra)
    return env


def env_bytes(stdout: bytes) -> dict[bytes, bytes]:
    return dict(item.split(b"=", 1) for item in stdout.split(b"\0") if b"=" in item)


COMMAND = {
    "bash": ["bash", "--norc", "--noprofile", "-c"],
    "zsh": ["zsh", "-f", "-c"],
    "dash": ["dash", "-c"],
}


# ESC alone: text output through click would lose "\x1b[31m" when stdout is a pipe.
ESC_ONLY = "lt \x1b[31mred\x1b[0m"


@pytest.mark.parametrize("name", [HOSTILE, ESC_ONLY], ids=["hostile", "esc"])
@pytest.mark.parametrize("shell", ["bash", "zsh", "dash", "fish"])
def test_eval_of_emit_setenv_is_byte_exact_and_runs_nothing(tmp_path, shell, name):
    root = make_tree(tmp_path / name / "libtorch", "2.13.0", "cpu", abi_line="1")
    # An inherited list element with the same bytes, and a newline-bearing one, must survive too.
    inherited = f"/cuda/lib64:{tmp_path}/old{name}"
    work = tmp_path / "work"
    work.mkdir()
    env = shell_env(tmp_path, TD_ROOT=str(root), LD_LIBRARY_PATH=inherited, TD_PY=sys.executable)
    need(shell)
    if shell == "fish":
        argv = ["fish", "--no-config", "-c",
                '$TD_PY -m doctor emit setenv --shell fish --libtorch $TD_ROOT | source; and env -0']
    else:
        flag = "sh" if shell == "dash" else shell
        argv = COMMAND[shell] + [f'eval "$("$TD_PY" -m doctor emit setenv --shell {flag} --libtorch "$TD_ROOT")" && env -0']
    out = subprocess.run(argv, env={k: v for k, v in env.items()}, cwd=work, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    got = env_bytes(out.stdout)
    raw = os.fsencode(str(root))
    assert got[b"LIBTORCH"] == raw
    assert got[b"Torch_DIR"] == raw + b"/share/cmake/Torch"
    assert got[b"LD_LIBRARY_PATH"] == raw + b"/lib:" + os.fsencode(inherited)
    assert got[b"CPLUS_INCLUDE_PATH"] == raw + b"/include:" + raw + b"/include/torch/csrc/api/include"
    assert not (work / "PWNED").exists() and not any(tmp_path.rglob("PWNED"))


def test_setenv_file_for_a_hostile_path_passes_shellcheck(tmp_path):
    root = make_tree(tmp_path / HOSTILE.replace("\n", " ") / "libtorch", "2.13.0", "cpu", abi_line="1")
    out = subprocess.run([sys.executable, "-m", "doctor", "emit", "setenv", "--shell", "sh", "--libtorch", str(root),
                          "-o", str(tmp_path / "setenv.sh")], env=shell_env(tmp_path), capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lint = subprocess.run([need("shellcheck"), "--severity=style", str(tmp_path / "setenv.sh")],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout


def test_a_colon_in_the_libtorch_path_is_refused_with_a_message(tmp_path):
    root = make_tree(tmp_path / "a:b" / "libtorch", "2.13.0", "cpu", abi_line="1")
    out = subprocess.run([sys.executable, "-m", "doctor", "emit", "setenv", "--shell", "bash", "--libtorch", str(root)],
                         env=shell_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == ""
    assert "contains ':'" in out.stderr and "-separated list" in out.stderr
    assert "hint:" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [["setenv", "--shell", "pwsh"], ["setenv", "--shell", "dotenv"], ["cargo"], ["github"]])
def test_a_non_utf8_path_is_refused_by_utf8_formats(tmp_path, args):
    root = make_tree(tmp_path / os.fsdecode(b"lt\xff") / "libtorch", "2.13.0", "cpu", abi_line="1")
    out = subprocess.run([sys.executable, "-m", "doctor", "emit", *args, "--libtorch", str(root)],
                         env=shell_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == "", out.stderr
    assert "UTF-8" in out.stderr and "hint:" in out.stderr and "Traceback" not in out.stderr
