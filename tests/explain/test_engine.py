"""The one pass: line numbers, root-cause order, folding, normalisation, and no crash on any input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.explain.engine import NEEDLES, explain_text, group, normalise, scan
from doctor.explain.normalise import utf8, wide_encoding

LOGS = Path(__file__).resolve().parents[2] / "tests/fixtures/logs"
HEADER = "main.cpp:1:10: fatal error: torch/torch.h: No such file or directory"
ABI = "main.cpp:(.text+0x3e): undefined reference to `c10::Device::Device(std::string const&)'"
LOADER = "./app: error while loading shared libraries: libc10.so: cannot open shared object file: No such file or directory"


def test_line_numbers_are_one_based_and_exact():
    text = "a\nb\n" + HEADER + "\nc\n\n" + LOADER  # no trailing newline on the last line
    found = explain_text(text, source="b.log")
    assert [(f.id, f.evidence[0].source) for f in found] == [
        ("headers.missing", "b.log:3"), ("loader.library-not-found", "b.log:6")]
    assert found[0].detail.startswith("line 3: ")


def test_root_cause_first_whatever_the_log_order():
    text = "\n".join([LOADER, ABI, HEADER])
    assert [f.id for f in explain_text(text)] == ["headers.missing", "abi.mismatch", "loader.library-not-found"]


def test_consequences_are_folded_into_their_cause():
    text = ("dyld[7283]: Library not loaded: @rpath/libc10.dylib\n"
            "  Reason: tried: '/x/lib/libc10.dylib' (duplicate LC_RPATH '/x/lib')\n")
    found = explain_text(text)
    assert [f.id for f in found] == ["macos.duplicate-rpath"]
    assert "explains line 1 too (loader.library-not-found)" in found[0].detail
    assert {e.source for e in found[0].evidence if e.kind == "log"} == {"log:1", "log:2"}


def test_many_lines_are_counted_not_all_shown():
    text = "\n".join(f"/usr/bin/ld: cannot find -ltorch_{i}" for i in range(40))
    (finding,) = explain_text(text)
    assert "... and 35 more lines like these" in finding.detail
    assert finding.detail.count("\nline ") == 4


def test_crlf_and_colour_codes_are_normalised():
    text = "noise\r\n\x1b[01;31m\x1b[Kfatal error: \x1b[m\x1b[Ktorch/types.h: No such file or directory\r\n"
    (finding,) = explain_text(text)
    assert finding.evidence[0].source == "log:2"
    assert "\x1b" not in finding.detail and "\r" not in finding.detail


@pytest.mark.parametrize("dressed", [
    # tput sgr0 ends bold with ESC ( B (an nF escape: designate US-ASCII) before ESC [ m
    "main.cpp:1:10: fatal error: \x1b[1mtorch/torch.h\x1b(B\x1b[m: No such file or directory",
    # colon-form SGR parameters (ITU T.416): 256-colour red
    "main.cpp:1:10: \x1b[38:5:196mfatal error:\x1b[0m torch/torch.h: No such file or directory",
    # an OSC 8 hyperlink ended by ST (ESC \\), the form GCC writes its diagnostic URLs in with GCC_URLS=st
    "main.cpp:1:10: fatal error: \x1b]8;;file:///usr/include/torch/torch.h\x1b\\torch/torch.h\x1b]8;;\x1b\\: "
    "No such file or directory",
    # a DCS string ended by ST, then a single-character escape (ESC 7: save the cursor)
    "\x1bP1$r0m\x1b\\\x1b7main.cpp:1:10: fatal error: torch/torch.h: No such file or directory",
], ids=["nF-sgr0", "colon-sgr", "osc8-st", "dcs-and-fe"])
def test_every_kind_of_escape_sequence_is_read_through(dressed):
    (finding,) = explain_text("noise\n" + dressed + "\n")
    assert finding.id == "headers.missing" and finding.evidence[0].source == "log:2"
    assert finding.evidence[0].excerpt == HEADER


def test_a_context_sign_alone_is_not_a_finding():
    assert explain_text("g++ -D_GLIBCXX_USE_CXX11_ABI=0 -c a.cpp") == []


def test_one_line_matching_two_needles_is_one_hit():
    line = "x: undefined symbol: _ZN3c105ErrorC1ENS_14SourceLocationESs undefined symbol: again"
    hits = scan(line)
    assert [(h.rule, h.lineno) for h in hits] == [("abi.mismatch", 1)]


def test_empty_and_binary_input():
    assert explain_text("") == []
    assert explain_text("\x00\x01\xff" * 1000) == []


@given(st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x00"), max_size=80), max_size=40),
       st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"]))
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_a_wide_log_reads_as_its_utf8_line_for_line(lines, codec):
    text = "\n".join([*lines, LOADER])
    wide = text.encode(codec)
    # with a mark any text; without, text whose high bytes are all NUL (Latin-1: every log's ASCII)
    if codec in ("utf-16", "utf-32") or all(ord(c) < 0x100 for c in text):
        assert utf8(wide) == text.encode("utf-8")
        assert [(f.id, f.evidence[0].source) for f in explain_text(wide)] == [
            ("loader.library-not-found", f"log:{len(lines) + 1}")]


def test_no_real_log_is_taken_for_a_wide_one():
    for log in LOGS.glob("*.log"):
        assert wide_encoding(log.read_bytes()) is None, log
    assert wide_encoding(b"\x00\x01\xff" * 1000) is None and wide_encoding(b"") is None
    # a mark followed by no wide text: binary junk that starts so (and its lines are found)
    junk = b"\xff\xfe garbage \x80\x81\n" + HEADER.encode() + b"\n"
    assert wide_encoding(junk) is None and [f.id for f in explain_text(junk)] == ["headers.missing"]


def test_a_huge_single_line_is_cut_not_choked_on():
    line = "x" * 5_000_000 + " cannot find -ltorch"
    assert explain_text(line) == []  # beyond MAX_LINE: ignored, quickly
    assert [f.id for f in explain_text("cannot find -ltorch " + "x" * 5_000_000)] == ["link.library-missing"]


def test_ten_megabytes_of_build_noise_around_one_failure():
    noise = "\n".join(f"[ {i % 100:2d}%] Building CXX object src/CMakeFiles/app.dir/layer{i}.cpp.o" for i in range(2000))
    log = (noise + "\n") * 80 + "\n".join((LOGS / "abi.mismatch--local-gxx-abi0.log").read_text().splitlines()) + "\n"
    assert len(log) > 10_000_000
    assert [f.id for f in explain_text(log)] == ["abi.mismatch"]  # how fast: scripts/bench-explain


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=80), max_size=40))
def test_random_text_never_crashes_and_without_needles_finds_nothing(lines):
    text = "\n".join(lines)
    found = explain_text(text)
    if not any(n in normalise(text) for n in NEEDLES):
        assert found == []


@settings(max_examples=100)
@given(st.lists(st.sampled_from(["", "ok", "[ 50%] Building CXX object a.o", "Epoch 3/10 loss=0.1", "warning: x"]),
                max_size=60), st.integers(min_value=0, max_value=60))
def test_a_known_line_is_found_at_its_line_number_anywhere(noise, at):
    at = min(at, len(noise))
    lines = noise[:at] + [LOADER] + noise[at:]
    (finding,) = explain_text("\n".join(lines))
    assert finding.id == "loader.library-not-found"
    assert finding.evidence[0].source == f"log:{at + 1}"


def test_group_keeps_only_ids_with_a_triggering_line():
    hits = scan(normalise("The current PyTorch install supports CUDA capabilities sm_50 sm_90.\n"))
    assert hits and group(hits) == []


def test_each_needle_implies_the_signs_of_every_needle_inside_it():
    # worked out when a needle first hits; the same as comparing every pair up front
    from doctor.explain.engine import _RANK, _SIGNS_OF
    from doctor.explain.patterns import TABLE

    own = {}
    for rule in TABLE:
        for sign in rule.signs:
            for needle in sign.needles:
                own.setdefault(needle.encode(), []).append(sign)
    for needle in NEEDLES:
        want = sorted({id(s): s for other, signs in own.items() if other in needle for s in signs}.values(),
                      key=lambda s: _RANK[id(s)][0])
        assert list(_SIGNS_OF[needle]) == want


_CLEAN_PIECES = [b"\x1b[31mred\x1b[0m", b"\r\n", b"\n", b"\r", b"plain ", b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
                 b"\x1b(B", b"\x1b[38:5:196m", b"x" * 40]


@given(st.lists(st.sampled_from(_CLEAN_PIECES), max_size=300), st.sampled_from([8, 33, 256]))
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_long_log_cleaned_a_chunk_at_a_time_is_the_log_cleaned_whole(monkeypatch, pieces, chunk):
    """clean works on chunks of whole lines past _CLEAN_CHUNK (a coloured 1 GiB log held several GB
    cleaned whole): the bytes out are exactly those of the whole log cleaned in one go, for lines
    longer than a chunk and CR LF pairs at every place a chunk can end."""
    from doctor.explain import normalise as n

    data = b"".join(pieces)
    whole = n._clean(data, b"\x1b" in data, b"\r" in data)
    monkeypatch.setattr(n, "_CLEAN_CHUNK", chunk)
    assert n.clean(data) == whole
