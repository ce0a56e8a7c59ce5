"""collect (the one pass the CLI runs) against its oracle, settle(group(scan(...))), on dense logs
built from the real corpus: every runner prefix, needles at a prefix's edge, wrapped and cut
lines, lines over MAX_LINE, typographic quotes, non-ASCII digits. Dense stretches are read line
by line by key and an id's lines past what the report shows are counted; the report must not
change by one character. And the build words disambiguate.py looks for, read by RE2 as the
stdlib reads them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.explain.engine import (AHEAD_MIN, DENSE_CHUNK, DENSE_LINES, MAX_LINE, NEEDLES, _Ahead, _live_spans,
                                   _needle_lines, collect, findings, group, normalise, scan, settle)
from doctor.explain.disambiguate import _CPU_BUILD, _CUDA_BUILD, _PYTHON, build_words, search
from doctor.explain.normalise import PREFIXES_BYTES, prefix_overlap

LOGS = Path(__file__).resolve().parents[2] / "tests/fixtures/logs"
RUNNER = [b"", b"2026-11-30T21:00:%02d.%dZ ", b"2026-11-30 21:00:%02d,%d\t", b"[rank%d]: ", b"[default%d]:",
          b"#%d 4.%d ", b"##[error]", b"[%d] ", b"cargo:warning=", b"> ", b">", b"  ", b"\t> [rank%d]: ",
          b"2026-11-30T21:00:0\xd9\xa3Z ", b"2026-11-30T21:00:%02dZ", b"##[warning]> ",
          b"[2026-11-30T21:00:%02d.%dZ] ", b"21:00:%02d  ", b"21:00:%02d.%d ", b"2026-11-30T21:00:%02d.%dZ 0%dO ",
          b"2026-11-30T21:00:%02d.%dZ 00E+", b"web-%d  | ", b"python.exe    | ", b"\t", b"app | \t"]
# texts that start where a prefix ends and could be read as more prefix, or a needle's tail
EDGES = [b"is incompatible with ", b"needed by foo", b"\xd9\xa3 x", b"[rank1]: x", b"12 files ", b"errno: 98 x", b"",
         b"01O x", b"10E+5 ", b"12:00:01 x", b"LNK1104  | x", b"EADDRINUSE ", b"\t"]


def corpus_hit_lines() -> list[bytes]:
    lines: dict[bytes, None] = {}
    for path in sorted(LOGS.glob("*.log")):
        text = normalise(path.read_bytes())
        rows = text.split(b"\n")
        for hit in scan(text):
            lines.setdefault(rows[hit.lineno - 1].strip(), None)
    return list(lines)


def dense_log(rng: random.Random, hits: list[bytes], n: int, long_lines: bool) -> bytes:
    out = []
    for _ in range(n):
        prefix = rng.choice(RUNNER)
        prefix = prefix % tuple(rng.randrange(60) for _ in range(prefix.count(b"%")))
        r = rng.random()
        if r < 0.05:
            body = rng.choice(EDGES) + rng.choice(hits)
        elif r < 0.08:
            body = b"noise line %d" % rng.randrange(10**6)
        elif r < 0.10:  # a terminal wrapped it
            whole = rng.choice(hits)
            cut = rng.randrange(1, max(2, len(whole)))
            out.append(prefix + whole[:cut])
            body = whole[cut:]
        elif r < 0.1001 and long_lines:
            body = rng.choice(hits) + b" x" * (MAX_LINE // 2)
        elif r < 0.11:
            body = rng.choice(hits).replace(b"'", "’".encode())
        else:  # a few lines repeated a lot, many more repeated less
            body = rng.choice(hits[:rng.choice((3, 40, len(hits)))])
        out.append(prefix + body)
    return b"\n".join(out) + b"\n" * rng.randrange(2)


def report(matches, data) -> list[dict]:
    return [f.__dict__ for f in findings(settle(matches, data, None))]


@pytest.fixture(scope="module")
def hits() -> list[bytes]:
    return corpus_hit_lines()


@pytest.mark.parametrize("seed", range(4))
def test_collect_reports_exactly_what_every_hit_reports(hits, seed):
    rng = random.Random(seed)
    data = normalise(dense_log(rng, hits, 12_000 + 6_000 * seed, long_lines=seed == 3))
    got = collect(data)
    assert sum(m.more for m in got) > 0  # lines were counted, not kept: the dense path ran
    assert report(got, data) == report(group(scan(data)), data)


@pytest.mark.parametrize("limit", [1, 3, 4096])
@pytest.mark.parametrize("slices", [2, 3, 5])
def test_needles_searched_ahead_are_those_found_reading_chunk_by_chunk(hits, slices, limit):
    """_Ahead's threads search a large log's later slices (each keeping at most `limit` needles);
    collect reads the log in chunks of whole lines and must meet the same needles, and make the
    same lines of them, as a search of each chunk as it comes."""
    rng = random.Random(10 * slices + limit)
    lines = [b"[ %2d%%] Building CXX object src/layer%d.cpp.o" % (i % 100, i) for i in range(4000)]
    for at in rng.sample(range(len(lines)), 150):
        lines[at] = rng.choice(RUNNER).replace(b"%", b"") + rng.choice(hits)
    data = normalise(b"\n".join(lines) + b"\n")
    ahead = _Ahead(data, slices, limit)
    begin, chunks = 0, 0
    while begin < len(data):
        stop = data.find(b"\n", begin + rng.randrange(1, 30_000))
        stop = len(data) if stop == -1 else stop + 1
        assert list(ahead.spans(data, begin, stop)) == list(_live_spans(data, begin, stop))
        begin, chunks = stop, chunks + 1
    assert chunks > slices
    whole = list(_needle_lines(data, 0, len(data), 1, {}))
    assert list(_needle_lines(data, 0, len(data), 1, {}, ahead)) == whole and len(whole) >= 100
    assert not any(b"\n" in needle for needle in NEEDLES)  # what lets a slice end at any line end


def test_a_large_log_reports_the_same_on_one_cpu_and_on_several(hits):
    """Past AHEAD_MIN, collect searches the later slices on `cpus` threads (the CLI passes the
    CPUs this process may use); the report is that of one thread, on a log of corpus hits behind
    runner prefixes, scattered through every slice."""
    rng = random.Random(7)
    filler = [b"[ %2d%%] Building CXX object src/layer%d.cpp.o" % (i % 100, i) for i in range(2000)]
    out, size = [], 0
    while size < AHEAD_MIN + (1 << 20):
        line = rng.choice(RUNNER).replace(b"%", b"") + rng.choice(hits) if rng.random() < 0.02 else rng.choice(filler)
        out.append(line)
        size += len(line) + 1
    data = normalise(b"\n".join(out) + b"\n")
    one = report(collect(data, cpus=1), data)
    assert one and report(collect(data, cpus=3), data) == one == report(collect(data, cpus=64), data)


@pytest.mark.parametrize("seed", range(3))
def test_lines_behind_one_timestamp_shape_are_keyed_after_it(hits, seed):
    """Every line starts with a CI timestamp of one shape (the keys are cut with slices; the third
    shape's fraction varies in length, so its chunks fall back to the prefix pattern), and what
    follows may be more prefixes, a needle's tail, non-ASCII digits, or a wrapped line."""
    rng = random.Random(seed)
    shape = (b"2026-11-30T21:%02d:%02d.%07dZ ", b"2026-11-30 21:%02d:%02d,%03d\t", b"2026-11-30T21:%02d:%02d.%dZ ")[seed]
    inner = [b"", b"", b"", b"[rank3]: ", b"> ", b"##[error]", b"\xd9\xa3 ", b"  ", b"cargo:warning=", b"#4 1.5 ",
             b"00O ", b"01E+", b"svc-1  | ", b"python.exe  | ", b"\t", b"12:00:01  "]
    out = []
    for _ in range(15_000):
        stamp = shape % (rng.randrange(60), rng.randrange(60), rng.randrange(1000))
        head = stamp + rng.choice(inner)
        r = rng.random()
        if r < 0.08:
            out.append(head + rng.choice(EDGES) + rng.choice(hits))
        elif r < 0.1:
            whole = rng.choice(hits)
            cut = rng.randrange(1, max(2, len(whole)))
            out += [head + whole[:cut], stamp + whole[cut:]]
        else:
            out.append(head + rng.choice(hits[:rng.choice((5, 50, len(hits)))]))
    data = normalise(b"\n".join(out) + b"\n")
    got = collect(data)
    assert sum(m.more for m in got) > 0
    assert report(got, data) == report(group(scan(data)), data)


def test_a_repeated_error_is_counted_with_its_first_lines_numbered(hits):
    line = b"/usr/bin/ld: cannot find -ltorch_cpu"
    data = b"".join(b"2026-11-30T21:%02d:%02d.%07dZ %s\n" % (i // 3600 % 60, i // 60 % 60, i, line) for i in range(50_000))
    (match,) = collect(data)
    assert match.rule.id == "link.library-missing"
    assert len(match.triggers) < 100 and match.more > 49_000  # counted, not kept
    (finding,) = findings([match])
    assert finding.detail.startswith("line 1: /usr/bin/ld: cannot find -ltorch_cpu\nline 2: ")
    assert "... and 49995 more lines like these" in finding.detail
    assert [e.source for e in finding.evidence if e.kind == "log"] == [f"log:{i}" for i in range(1, 21)]
    assert report([match], data) == report(group(scan(data)), data)


def compose_name(rng: random.Random) -> bytes:
    """A docker compose container name: a letter, then letters, digits, '_', '.', '-'; often holding a
    needle's words, the names most likely to hide one."""
    allowed = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
    word = bytes(c for c in rng.choice(NEEDLES) if c in allowed)
    cut = rng.randrange(len(word) + 1)
    middle = word[cut:cut + rng.randrange(1, 30)] if rng.random() < 0.7 else b""
    return bytes([rng.choice(allowed[:52])]) + middle + bytes(rng.choice(allowed) for _ in range(rng.randrange(3)))


def sample_prefix(rng: random.Random) -> bytes:
    """One run of runner prefixes as normalise's pattern reads them."""
    pieces = [b"%04d-%02d-%02d%s%02d:%02d:%02d%s%s%s" % (
                  rng.randrange(10**4), rng.randrange(100), rng.randrange(100), rng.choice((b"T", b" ")),
                  rng.randrange(100), rng.randrange(100), rng.randrange(100),
                  rng.choice((b"", b".%d" % rng.randrange(10**6), b",%d" % rng.randrange(10))),
                  rng.choice((b"", b"Z")), rng.choice((b" ", b"\t"))),
              b"[%s%d]:%s" % (rng.choice((b"rank", b"default")), rng.randrange(10**4), rng.choice((b"", b" ", b"\t"))),
              b"#%d %d.%d " % (rng.randrange(10**4), rng.randrange(10**4), rng.randrange(100)),
              b"##[%s]" % bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(1, 11))),
              b"[%d] " % rng.randrange(10**7), b"cargo:warning=", rng.choice((b">", b"> ", b">\t")),
              b"[%04d-%02d-%02dT%02d:%02d:%02d%sZ]%s" % (
                  rng.randrange(10**4), rng.randrange(100), rng.randrange(100), rng.randrange(100), rng.randrange(100),
                  rng.randrange(100), rng.choice((b"", b".%d" % rng.randrange(10**9))), rng.choice((b" ", b"\t"))),
              b"%02d:%02d:%02d%s%s" % (rng.randrange(100), rng.randrange(100), rng.randrange(100),
                                       rng.choice((b"", b".%d" % rng.randrange(1000))),
                                       rng.choice((b" ", b"\t", b"  ", b" \t"))),
              b"%02x%s%s" % (rng.randrange(256), rng.choice((b"O", b"E")), rng.choice((b" ", b"+"))),
              compose_name(rng) + b" " * rng.randrange(1, 5) + rng.choice((b"| ", b"|\t"))]
    return b" " * rng.randrange(2) + b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 4)))


def test_every_way_a_needle_can_begin_inside_a_prefix_is_known():
    """prefix_overlap is a superset: wherever a needle starts inside real prefixes, it says so."""
    overlap = {n: prefix_overlap(n) for n in NEEDLES}
    rng = random.Random(7)
    for _ in range(3000):
        prefix = sample_prefix(rng)
        assert PREFIXES_BYTES.match(prefix).end() == len(prefix)
        for needle, (cuts, inside) in overlap.items():
            if needle in prefix:
                assert inside, (needle, prefix)
            for i in range(1, len(needle)):
                if prefix.endswith(needle[:i]):
                    assert i in cuts, (needle, i, prefix)
    assert overlap[b" is incompatible with "] == ((1,), False)
    assert overlap[b"undefined reference to"] == ((), False)


def test_a_chunk_of_many_short_lines_is_read_in_parts(hits):
    """More lines than a dense chunk holds (DENSE_LINES): the rest is the next chunk's, numbered on."""
    rng = random.Random(11)
    parts = []
    for i in range(300_000):
        parts.append(rng.choice(hits[:30]) if i % 8 == 0 else b"%d" % (i % 10))
    data = normalise(b"\n".join(parts) + b"\n")
    assert data.count(b"\n", 0, DENSE_CHUNK) > DENSE_LINES  # a full-size chunk would hold more
    got = collect(data)
    assert sum(m.more for m in got) > 0
    assert report(got, data) == report(group(scan(data)), data)


FRAGMENTS = [b"+cu126", b"+cu", b"cu121", b"xcu121", b"libtorch_cuda.so", b"libtorch_cuda_linalg.so", b"torch_cuda.dll",
             b"torch_cudaX.lib", b"Caffe2: CUDA detected", b"TORCH_CUDA_VERSION=cu118", b"+cpu", b"+cpux",
             b"libtorch-cxx11-abi-shared-with-deps-2.1.0-cpu", b"/cpu/libtorch", b"libtorch-2.1.0%2Bcpu",
             b"Traceback (most recent call last)", b"<ipython-input-", b"RuntimeError: Cannot initialize CUDA",
             b"site-packages/torch/nn/", b"site-packages\\torch\\nn\\", b"\n", b" ", b"_", b"-", b".", b"\xff", b"\xe9", b"9"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_re2_reads_the_build_words_as_the_stdlib_does(parts):
    data = b"".join(parts)
    for pattern in (_CUDA_BUILD, _CPU_BUILD, _PYTHON):
        want, got = pattern.search(data), search(pattern, data)
        assert (got and (got.start(), got.group(0))) == (want and (want.start(), want.group(0)))


def test_re2_reads_the_corpus_build_words_as_the_stdlib_does():
    for path in sorted(LOGS.glob("*.log")):
        data = normalise(path.read_bytes())
        for pattern in (_CUDA_BUILD, _CPU_BUILD, _PYTHON):
            want, got = pattern.search(data), search(pattern, data)
            assert (got and (got.start(), got.group(0))) == (want and (want.start(), want.group(0))), path.name


@settings(max_examples=400)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_one_pass_finds_the_first_build_word_of_each_kind_as_three_searches_do(parts):
    data = b"".join(parts)
    words = build_words(data)
    for kind, pattern in (("cuda", _CUDA_BUILD), ("cpu", _CPU_BUILD), ("python", _PYTHON)):
        want, got = pattern.search(data), words.get(kind)
        assert (got and (got.start(), got.group(0))) == (want and (want.start(), want.group(0))), kind


def test_one_pass_over_the_corpus_finds_what_three_searches_find():
    for path in sorted(LOGS.glob("*.log")):
        data = normalise(path.read_bytes())
        words = build_words(data)
        for kind, pattern in (("cuda", _CUDA_BUILD), ("cpu", _CPU_BUILD), ("python", _PYTHON)):
            want, got = pattern.search(data), words.get(kind)
            assert (got and (got.start(), got.group(0))) == (want and (want.start(), want.group(0))), (path.name, kind)


def test_two_kinds_that_start_at_the_same_byte_are_both_found():
    data = b"x libtorch_cuda.so-libtorch-cxx11-abi-shared-with-deps-2.1.0-cpu y"
    assert _CUDA_BUILD.search(data).start() == _CPU_BUILD.search(data).start() == 2
    words = build_words(data)
    assert words["cuda"].group(0) == b"libtorch_cuda.so" and words["cpu"].start() == 2 and "python" not in words
