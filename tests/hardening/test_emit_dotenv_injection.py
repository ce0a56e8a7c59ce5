"""Threat: a value in `doctor emit setenv --shell dotenv` (our path, or LD_LIBRARY_PATH /
CPLUS_INCLUDE_PATH / LIBRARY_PATH / CMAKE_PREFIX_PATH inherited from the environment) reads back
different from what was written — a newline that starts a variable, `${…}` that python-dotenv
expands, quotes or a trailing backslash that change the value, a `#` that cuts it.

The file must be exact for the real python-dotenv and for `docker run --env-file`, read here by a
port of docker's reader (docker/cli opts/file.go parseKeyValueFile; documented at
https://docs.docker.com/reference/cli/docker/container/run/#env : "VAR=VAL" lines, `#` comments,
no quote processing). What one of them cannot carry is refused, never altered.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from dotenv import dotenv_values
from hypothesis import given, settings
from hypothesis import strategies as st
from testsupport.support import REPO, make_tree

from doctor.errors import DoctorError
from doctor.quoting import dotenv_line


def docker_env_file(data: bytes) -> dict[str, str]:
    """docker's --env-file reader: bufio.Scanner lines (split at \\n, one trailing \\r dropped,
    64 KiB max), invalid UTF-8 is an error, a UTF-8 BOM is dropped from line 1, leading whitespace
    trimmed, blank and '#' lines skipped, the key must not hold spaces, the value is the rest of
    the line untouched (quotes included)."""
    out = {}
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if len(raw) > 64 * 1024 - 1:
            raise ValueError("bufio.Scanner: token too long")
        text = raw.decode("utf-8")  # raises like docker's utf8.Valid check
        if number == 1:
            text = text.removeprefix("\ufeff")
        line = text.lstrip()  # unicode.IsSpace
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.lstrip(" \t")
        if not key or any(c in key for c in " \t"):
            raise ValueError(f"bad key in {line!r}")
        if not sep:
            raise ValueError(f"{key} takes its value from docker's environment: not what we write")
        out[key] = value
    return out


def python_dotenv(data: bytes) -> dict[str, str | None]:
    # As load_dotenv reads a file: UTF-8 text with universal newlines, interpolation on (the default).
    return dict(dotenv_values(stream=io.StringIO(data.decode("utf-8"), newline=None)))


@settings(max_examples=400)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(
    list(" \t\n\r#'\"\\${}=:\x0b\x0c\x1c\x85\u2028\xa0")), max_size=40))
def test_every_dotenv_line_reads_back_exactly_or_is_refused(value):
    try:
        line = dotenv_line("LD_LIBRARY_PATH", value)
    except DoctorError as exc:
        assert "dotenv cannot carry LD_LIBRARY_PATH" in exc.message and exc.hint
        return
    data = ("# header\n" + line + "\nNEXT=1\n").encode("utf-8")
    assert python_dotenv(data) == {"LD_LIBRARY_PATH": value, "NEXT": "1"}
    assert docker_env_file(data) == {"LD_LIBRARY_PATH": value, "NEXT": "1"}


@pytest.mark.parametrize("value", [
    "/opt/a b/lib\\",            # trailing backslash: kept
    "/opt/$HOME/`x`/$(y)/lib",   # $ without braces, backticks: plain text for both readers
    "/opt/it's \"q\"/lib",       # quotes inside: kept (only a leading quote means quoting)
    "/opt/#1/lib",               # '#' not after whitespace: no comment
])
def test_awkward_but_representable_values_are_exact(value):
    data = (dotenv_line("X", value) + "\n").encode()
    assert python_dotenv(data) == {"X": value} and docker_env_file(data) == {"X": value}


@pytest.mark.parametrize("value,why", [
    ("/opt/${HOME}/lib", "${"),
    ("/a\nLD_PRELOAD=/evil.so", "line break"),
    ("'/opt/lib'", "leading quote"),
    ("/opt/lib #x", "'#'"),
    ("/opt/lib ", "whitespace"),
    ("/opt/lib\r", "line break"),
])
def test_values_a_reader_would_change_are_refused(value, why):
    with pytest.raises(DoctorError, match=why if why != "${" else r"\$\{"):
        dotenv_line("X", value)


def run_doctor(tmp_path, *args, **env):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(REPO), "LANG": "C.UTF-8", **env}
    return subprocess.run([sys.executable, "-m", "doctor", *args], env=full, capture_output=True, timeout=120)


def test_emitted_dotenv_file_is_exact_for_both_readers(tmp_path):
    root = make_tree(tmp_path / "lib torch $x 'q' \\b#1" / "libtorch", "2.13.0", "cpu", abi_line="1")
    inherited = "/cuda/lib64:/opt/it's/lib\\"
    got = run_doctor(tmp_path, "emit", "setenv", "--shell", "dotenv", "--libtorch", str(root),
                     "-o", str(tmp_path / ".env"), LD_LIBRARY_PATH=inherited, CMAKE_PREFIX_PATH="/p q")
    assert got.returncode == 0, got.stderr
    data = (tmp_path / ".env").read_bytes()
    want = {"LIBTORCH": str(root), "LD_LIBRARY_PATH": f"{root}/lib:{inherited}", "CMAKE_PREFIX_PATH": f"{root}:/p q",
            "LIBRARY_PATH": f"{root}/lib", "CPLUS_INCLUDE_PATH": f"{root}/include:{root}/include/torch/csrc/api/include"}
    for reader in (python_dotenv, docker_env_file):
        values = reader(data)
        assert {k: values[k] for k in want} == want, reader.__name__


@pytest.mark.parametrize("variable", ["LD_LIBRARY_PATH", "CMAKE_PREFIX_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH"])
def test_an_inherited_variable_that_would_inject_is_refused_by_name(tmp_path, variable):
    root = make_tree(tmp_path / "libtorch", "2.13.0", "cpu", abi_line="1")
    got = run_doctor(tmp_path, "emit", "setenv", "--shell", "dotenv", "--libtorch", str(root),
                     **{variable: "/x\nLD_PRELOAD=/tmp/evil.so"})
    err = got.stderr.decode()
    assert got.returncode == 1 and got.stdout == b""
    assert f"error: dotenv cannot carry {variable}=" in err and "hint:" in err and "Traceback" not in err
