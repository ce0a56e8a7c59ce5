"""doctor.quoting against the real shells: every quoted word reads back as the value, byte for byte."""

from __future__ import annotations

import os
import subprocess

import pytest
from testsupport.emit_helpers import need

from doctor.errors import DoctorError
from doctor.quoting import fish_quote, for_terminal, sh_paste, sh_prepend, sh_quote

NASTY = ["plain", "", "a b", "it's", "''", "\\", "a\\", "\\'", "$HOME", "${x}", "$(id)", "`id`", '"q"', "\n", "a\nb\n",
         "\x1b[31m", "\x01\x7f\t", "*", "~", "=cmd", "-n", "#c", "a;b|c&d", "!x", "é ☃", os.fsdecode(b"\xff\xfe"),
         "/opt/\u202eexe.gnp\u202c/\u2066lib"]


def words(argv: list[str], script: str, home) -> list[bytes]:
    # fish writes its config under HOME: a temporary one, never the real or a shared path
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
           "XDG_DATA_HOME": str(home / "data")}
    out = subprocess.run(argv + [script], capture_output=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.split(b"\0")[:-1]


SHELLS = [["bash", "--norc", "--noprofile", "-c"], ["zsh", "-f", "-c"], ["dash", "-c"]]


@pytest.mark.parametrize("argv", SHELLS, ids=lambda a: a[0])
def test_sh_words_read_back_exactly(argv, tmp_path):
    need(argv[0])
    script = "printf '%s\\0' " + " ".join(sh_quote(v) for v in NASTY)
    assert words(argv, os.fsencode(script).decode("utf-8", "surrogateescape"), tmp_path) == [os.fsencode(v) for v in NASTY]


@pytest.mark.parametrize("argv", SHELLS, ids=lambda a: a[0])
def test_pasted_words_are_the_values_as_shown(argv, tmp_path):
    """A fix command as the terminal shows it (for_terminal), pasted: each word is the value's
    bytes. ESC, CR and an undecodable byte are shown as escapes, so they go in $'\\xNN' pieces,
    which dash 0.5.12 does not read (POSIX added them in 2024): there only the other values."""
    need(argv[0])
    values = [v for v in NASTY if argv[0] != "dash" or "$'" not in sh_paste(v)]
    script = "printf '%s\\0' " + " ".join(for_terminal(sh_paste(v)) for v in values)
    assert words(argv, script, tmp_path) == [os.fsencode(v) for v in values]
    if argv[0] != "dash":
        assert len(values) == len(NASTY)


def test_fish_words_read_back_exactly(tmp_path):
    need("fish")
    script = "printf '%s\\0' " + " ".join(fish_quote(v) for v in NASTY)
    assert words(["fish", "--no-config", "-c"], script, tmp_path) == [os.fsencode(v) for v in NASTY]


def test_nul_is_refused_and_plain_words_stay_bare():
    with pytest.raises(DoctorError, match="NUL"):
        sh_quote("a\0b")
    assert sh_paste("/opt/libtorch/lib") == "/opt/libtorch/lib" and sh_paste("=x") == "'=x'"
    assert sh_prepend("LIBRARY_PATH", ["/a b"]) == "export LIBRARY_PATH='/a b'\"${LIBRARY_PATH:+:$LIBRARY_PATH}\""
