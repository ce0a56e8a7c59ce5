"""Threat: a newline in a value appended to $GITHUB_ENV (our path, or an inherited LD_LIBRARY_PATH
the doctor merges) ends `NAME=value` and sets a variable of the attacker's choosing, such as
LD_PRELOAD or NODE_OPTIONS, for every later step of the job. Also: $GITHUB_ENV or -o that cannot
be written is a message (exit 1), not a traceback.

The files are read back by a line-for-line port of the runner's reader (tests/testsupport/gha_runner.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testsupport.support import FULL_DEVICE, REPO, make_device, make_tree

from doctor.errors import DoctorError
from doctor.quoting import github_env_block, github_path_line

from testsupport.gha_runner import parse_env_file


def run_doctor(tmp_path, *args, **env):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(REPO), "LANG": "C.UTF-8", **env}
    return subprocess.run([sys.executable, "-m", "doctor", *args], env=full, capture_output=True, text=True, timeout=120)


@settings(max_examples=300)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=8)
                | st.sampled_from(["\n", "\r", "<<", "=", "ghadelimiter_", "\r\n"]), max_size=12).map("".join))
def test_env_block_reads_back_exactly(value):
    text = "EARLIER=1\n" + github_env_block("LD_LIBRARY_PATH", value) + "LATER=2\n"
    assert parse_env_file(text) == {"EARLIER": "1", "LD_LIBRARY_PATH": value, "LATER": "2"}


def test_a_value_holding_delimiter_lines_cannot_end_its_block():
    # Lines that look like a delimiter and like `NAME=value` stay part of the value.
    value = "/a\nghadelimiter_0\nLD_PRELOAD=/evil.so\nX<<Y\n"
    block = github_env_block("LD_LIBRARY_PATH", value)
    delimiter = block.split("\n", 1)[0].split("<<", 1)[1]
    assert delimiter.startswith("ghadelimiter_") and len(delimiter) > 40 and delimiter not in value
    assert parse_env_file(block) == {"LD_LIBRARY_PATH": value}


def test_windows_runner_reading_refuses_a_carriage_return():
    assert parse_env_file(github_env_block("A", "x\ny", "Windows"), windows=True) == {"A": "x\ny"}
    with pytest.raises(DoctorError, match="carriage return"):
        github_env_block("A", "x\r\ny", "Windows")


@pytest.mark.parametrize("path", ["/a\nb", "/a\rb", ""])
def test_github_path_refuses_what_is_not_one_line(path):
    with pytest.raises(DoctorError):
        github_path_line(path)


def test_emit_github_with_a_hostile_path_and_inherited_variables_sets_exactly_ours(tmp_path):
    root = make_tree(tmp_path / "lt\nLD_PRELOAD=x" / "libtorch", "2.13.0", "cpu", abi_line="1")
    gh_env, gh_path = tmp_path / "github_env", tmp_path / "github_path"
    gh_env.write_text("EARLIER=1\n")
    hostile = {"LD_LIBRARY_PATH": "/cuda/lib64\nNODE_OPTIONS=--require=/tmp/evil.js",
               "CMAKE_PREFIX_PATH": "/p\nBASH_ENV=/tmp/evil.sh", "CPLUS_INCLUDE_PATH": "/i\r\nX=1",
               "LIBRARY_PATH": "ghadelimiter_x\nLD_AUDIT=/evil.so"}
    got = run_doctor(tmp_path, "emit", "github", "--libtorch", str(root),
                     GITHUB_ENV=str(gh_env), GITHUB_PATH=str(gh_path), **hostile)
    assert got.returncode == 0, got.stderr
    values = parse_env_file(gh_env.read_bytes().decode())  # no newline translation: \r stays
    assert set(values) == {"EARLIER", "LIBTORCH", "LIBTORCH_INCLUDE", "LIBTORCH_LIB", "LIBTORCH_CXX11_ABI", "Torch_DIR",
                           "CMAKE_PREFIX_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH"}
    assert values["LIBTORCH"] == str(root)
    assert values["LD_LIBRARY_PATH"] == f"{root}/lib:{hostile['LD_LIBRARY_PATH']}"
    assert values["CMAKE_PREFIX_PATH"] == f"{root}:{hostile['CMAKE_PREFIX_PATH']}"
    assert values["CPLUS_INCLUDE_PATH"].endswith(":" + hostile["CPLUS_INCLUDE_PATH"])
    assert values["LIBRARY_PATH"] == f"{root}/lib:{hostile['LIBRARY_PATH']}"


@pytest.mark.parametrize("where", ["directory", "missing folder", "under a file"])
def test_unwritable_github_env_is_exit_1_with_a_hint(tmp_path, where):
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    (tmp_path / "afile").write_text("")
    target = {"directory": tmp_path, "missing folder": tmp_path / "nope/env",
              "under a file": tmp_path / "afile/env"}[where]
    got = run_doctor(tmp_path, "emit", "github", "--libtorch", str(root), GITHUB_ENV=str(target))
    assert got.returncode == 1, got.stderr
    assert got.stderr.startswith("error: cannot append to $GITHUB_ENV") and "\nhint: " in got.stderr
    assert "Traceback" not in got.stderr


def test_output_that_is_a_directory_is_a_usage_error(tmp_path):
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    got = run_doctor(tmp_path, "emit", "setenv", "--libtorch", str(root), "-o", str(tmp_path))
    assert got.returncode == 2 and "is a directory" in got.stderr and "Traceback" not in got.stderr


@pytest.mark.parametrize("where", ["under a file", "proc"])
def test_unwritable_output_file_is_exit_1_with_a_hint(tmp_path, where):
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    (tmp_path / "afile").write_text("")
    target = {"under a file": tmp_path / "afile/setenv.sh",
              "proc": Path("/proc/version")}[where]
    got = run_doctor(tmp_path, "emit", "setenv", "--shell", "sh", "--libtorch", str(root), "-o", str(target))
    assert got.returncode == 1, (got.returncode, got.stderr)
    assert got.stderr.startswith("error: cannot write ") and "\nhint: " in got.stderr
    assert "Traceback" not in got.stderr and got.stdout == ""


def test_output_into_a_pipe_or_device_is_written_through_as_the_shell_does(tmp_path):
    """`-o /dev/null`, `-o myfifo`, `-o >(cmd)` and `-o /dev/stdout` get the bytes stdout would
    get, and stay what they were: replacing one with a regular file (as root: /dev/null itself)
    was the bug."""
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    args = ("emit", "setenv", "--shell", "sh", "--libtorch", str(root))
    expected = run_doctor(tmp_path, *args).stdout.encode()
    assert b"\nexport LIBTORCH=" in expected

    null = make_device(tmp_path / "null", "char")
    fifo = make_device(tmp_path / "fifo", "fifo")
    before = {p: os.lstat(p) for p in (null, fifo)}
    got = run_doctor(tmp_path, *args, "-o", str(null))
    assert got.returncode == 0 and got.stderr == f"wrote {null}\n", got.stderr

    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # there before the writer: it need not wait
    try:
        got = run_doctor(tmp_path, *args, "-o", str(fifo))
        data = b""
        while chunk := os.read(reader, 65536):
            data += chunk
    finally:
        os.close(reader)
    assert got.returncode == 0 and data == expected, got.stderr
    for path, st in before.items():
        now = os.lstat(path)
        assert (now.st_ino, now.st_mode, now.st_rdev) == (st.st_ino, st.st_mode, st.st_rdev), path

    # /dev/fd/63 and /dev/stdout are links to "pipe:[…]": written through, not resolved as text
    out = tmp_path / "substituted"
    script = '"$0" -m doctor "$@" -o >(cat > "$OUT"); status=$?; wait $!; exit $status'
    got = subprocess.run(["bash", "-c", script, sys.executable, *args], capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home"), "OUT": str(out)})
    assert got.returncode == 0 and out.read_bytes() == expected, got.stderr
    got = subprocess.run([sys.executable, "-m", "doctor", *args, "-o", "/dev/stdout"], capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home")})
    assert got.returncode == 0 and got.stdout == expected, got.stderr


@pytest.mark.parametrize("kind", ["full device", "block device", "socket"])
def test_output_into_a_device_that_refuses_is_exit_1_and_keeps_it(tmp_path, kind):
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    node = {"full device": lambda p: make_device(p, "char", FULL_DEVICE),
            "block device": lambda p: make_device(p, "block", (7, 250)),
            "socket": lambda p: make_device(p, "socket")}[kind](tmp_path / "out")
    before = os.lstat(node)
    got = run_doctor(tmp_path, "emit", "setenv", "--shell", "sh", "--libtorch", str(root), "-o", str(node))
    assert got.returncode == 1, (got.returncode, got.stderr)
    error, hint = got.stderr.splitlines()
    assert error == {"full device": f"error: cannot write {node}: No space left on device",
                     "block device": f"error: cannot write {node}: it is a block device, not a regular file",
                     "socket": f"error: cannot write {node}: it is a socket, not a regular file"}[kind]
    assert hint.startswith(f"hint: {node} is a ") and hint.endswith("or leave -o out to print to stdout")
    now = os.lstat(node)
    assert (now.st_ino, now.st_mode, now.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)
