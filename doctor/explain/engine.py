"""One pass over a log: find the lines the pattern table knows, group them by diagnosis,
fold consequences into their cause, and order the findings root cause first.

Speed and safety (docs/performance.md, docs/security.md):
- The log stays bytes. One RE2 automaton of every needle of the table (escaped literals,
  longest first) walks it once, in linear time, at a few hundred MB/s; the text is never
  decoded as a whole, so non-UTF-8 input costs nothing and breaks nothing.
- Only a line holding a needle is decoded (first MAX_LINE bytes) and meets the regexes of
  the signs its needles name. Those regexes are written to be linear on a line (see
  patterns.py), and identical lines are matched once (a cache), so 40,000 copies of one
  linker error cost one match.
- Line numbers come from counting newlines between hit lines (C speed), grouping is one
  dictionary pass over the hits: nothing compares every hit with every other.
- A large log's later slices are searched ahead by a thread per spare CPU while this one reads
  the first (RE2 releases the GIL): the one pass takes half the time on two CPUs (`_Ahead`).
- Where needle lines are dense (a log of nothing but errors), `collect` reads a chunk line by
  line at C speed instead: split, keyed by the text after the runner prefixes (so lines that
  differ only in their timestamps share a key), counted, and matched once per distinct key.
  An id's first FULL_HITS hits and FULL_TRIGGERS triggering lines, everything the report
  shows, are kept whole; its later lines are counted (`Match.more`), and the first and last
  line of each distinct text are kept for the advice. The report is the same, line for line,
  as that of every hit (tests/explain/test_collect.py checks it against group(scan(...))).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable
from bisect import bisect_left, bisect_right
from itertools import accumulate, compress, count, repeat
from operator import add, attrgetter, getitem, sub
from dataclasses import field

from doctor.explain.advisors import advise
from doctor.explain.normalise import (DIGITS_ALIKE, PREFIXES_BYTES, STAMP_BYTES, STAMP_CHARS, clean_line,
                                      join_wrapped, prefix_overlap, wrap_candidate)
from doctor.explain.patterns import ORDER, RULES, TABLE, Rule, Sign
from doctor.formats import clip
from doctor.model import Evidence, Finding, Level
from doctor.record import record

MAX_LINE = 4000  # a line longer than this (bytes) is cut before regexes see it
SHOWN = 5  # proving lines shown per finding; the rest are counted
_CACHE_LIMIT = 4096  # distinct hit lines remembered; identical lines are matched once
FULL_HITS = 20  # an id's first hits kept whole: the report's evidence is its first 20 lines...
FULL_TRIGGERS = SHOWN  # ...and its first 5 triggering ones; later lines are counted (collect)
CHUNK = 1 << 16  # bytes a step of collect reads (whole lines)...
DENSE_CHUNK = 1 << 22  # ...at most; a dense chunk is held as a list of at most DENSE_LINES lines
DENSE_LINES = 1 << 16
DENSE = 1024  # bytes per needle line at which collect reads the next chunk line by line
_KEYS_LIMIT = 1 << 17  # distinct dense lines remembered


class _Implied(dict):
    """needle (UTF-8) -> every sign it implies, in the order the table lists them; worked out for
    a needle when it first hits (comparing every pair of needles up front cost ~15 ms a run).

    A needle that contains another needle implies that one's signs too: the automaton reports
    the longest needle at a position, never the shorter ones inside it.
    """

    def __init__(self, order: dict[bytes, list[tuple[int, Sign]]]) -> None:
        super().__init__()
        self._order = order

    def __missing__(self, needle: bytes) -> tuple[Sign, ...]:
        signs = {id(s): (i, s) for other, pairs in self._order.items() if other in needle for i, s in pairs}
        implied = self[needle] = tuple(s for _, s in sorted(signs.values(), key=lambda p: p[0]))
        return implied


def _needle_table() -> tuple[_Implied, dict[int, tuple[int, Rule]], list[bytes]]:
    """The signs each needle implies, each sign's rank and rule, and the needles longest first."""
    order: dict[bytes, list[tuple[int, Sign]]] = {}
    rank: dict[int, tuple[int, Rule]] = {}
    n = 0
    for rule in TABLE:
        for sign in rule.signs:
            rank[id(sign)] = (n, rule)
            n += 1
            for needle in sign.needles:
                order.setdefault(needle.encode(), []).append((rank[id(sign)][0], sign))
    return _Implied(order), rank, sorted(order, key=len, reverse=True)


_SIGNS_OF, _RANK, NEEDLES = _needle_table()
_AUTOMATON = None


def automaton():
    """The one RE2 pattern of all needles, compiled on first use (google-re2 is imported lazily)."""
    global _AUTOMATON
    if _AUTOMATON is None:
        import re2

        options = re2.Options()
        options.max_mem = 64 << 20
        _AUTOMATON = re2.compile(b"|".join(re.escape(n) for n in NEEDLES), options)
    return _AUTOMATON


class Hit:
    """One log line that matched one sign."""

    __slots__ = ("rule", "lineno", "line", "groups", "trigger")

    def __init__(self, rule: str, lineno: int, line: str, groups: dict[str, str], trigger: bool) -> None:
        self.rule, self.lineno, self.line, self.groups, self.trigger = rule, lineno, line, groups, trigger

    def __repr__(self) -> str:
        return f"Hit({self.rule!r}, {self.lineno}, {self.line[:60]!r}, {self.groups!r}, {self.trigger})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hit) and (self.rule, self.lineno, self.line, self.groups, self.trigger) == (
            other.rule, other.lineno, other.line, other.groups, other.trigger)


@record
class Match:
    """Everything the log says about one diagnosis id."""

    rule: Rule
    hits: list[Hit] = field(default_factory=list)
    folded: list[Match] = field(default_factory=list)  # consequences this cause explains
    chosen_by: str = ""  # for a look-alike pair: which evidence chose this id (settle)
    more: int = 0  # triggering lines counted but not kept in `hits` (collect: the report counts them)

    @property
    def triggers(self) -> list[Hit]:
        return [h for h in self.hits if h.trigger]

    def values(self, name: str) -> list[str]:
        """Every distinct value a named group took, in order of appearance."""
        seen: dict[str, None] = {}
        for h in self.hits:
            v = h.groups.get(name)
            if v:
                seen.setdefault(v, None)
        return list(seen)

    def first(self, name: str) -> str | None:
        values = self.values(name)
        return values[0] if values else None


def to_bytes(text: str | bytes) -> bytes:
    """Logs are bytes; text given as str (tests, the build probe) is encoded back, lone surrogates kept."""
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def normalise(data: bytes | str) -> bytes:
    """The log as the patterns read it, line for line (doctor/explain/normalise.py): a log in
    UTF-16 or UTF-32 decoded, colour codes, CR line ends, runner prefixes and typographic quotes
    taken off."""
    from doctor.explain.normalise import clean, utf8

    return clean(utf8(to_bytes(data)))


def _match_line(probe: str, signs: Iterable[Sign]) -> list[tuple[str, dict[str, str], bool]]:
    found = []
    for sign in signs:
        m = sign.regex.search(probe)
        if m:
            found.append((_RANK[id(sign)][1].id, {k: v for k, v in m.groupdict().items() if v}, sign.trigger))
    return found


_JOINED: dict = {}


def _joined_match(joined: str, signs: list[Sign]) -> list:
    """_match_line for a joined line, remembered: in a log whose lines differ only in their
    prefixes, the same two lines are joined again and again."""
    key = (joined, *map(id, signs))
    found = _JOINED.get(key)
    if found is None:
        if len(_JOINED) >= _CACHE_LIMIT:
            _JOINED.clear()
        found = _JOINED[key] = _match_line(joined, signs)
    return found


def _mend(data: bytes, start: int, end: int, lineno: int, probe: str, signs: list[Sign]):
    """A needle line no regex matched, joined to the line before or after it where a terminal
    or tracker could have wrapped there (normalise.wrap_candidate); (line, its number, matches)."""
    if start > 0:
        before = data.rfind(b"\n", 0, start - 1) + 1
        prev = data[before:start - 1][-MAX_LINE:]
        if wrap_candidate(prev):
            joined = join_wrapped(clean_line(prev.decode("utf-8", "replace")), probe)
            found = _joined_match(joined, signs)
            if found:
                return joined, lineno - 1, found
    if end < len(data) and wrap_candidate(data[start:end]):
        after = data.find(b"\n", end + 1)
        nxt = data[end + 1:after if after != -1 else len(data)][:MAX_LINE]
        joined = join_wrapped(probe, clean_line(nxt.decode("utf-8", "replace")))
        found = _joined_match(joined, signs)
        if found:
            return joined, lineno, found
    return probe, lineno, []


def scan(data: bytes | str) -> list[Hit]:
    """All lines that match a sign, in log order. `data` should be normalised."""
    data = to_bytes(data)
    return [Hit(rule, at, line, dict(groups), trigger)
            for at, line, found, *_ in _needle_lines(data, 0, len(data), 1, {}) for rule, groups, trigger in found]


def _needle_lines(data: bytes, begin: int, stop_at: int, lineno: int, cache: dict, ahead: _Ahead | None = None):
    """(line number, line, matches, where the line ends, its own number, where it starts) for each
    line of data[begin:stop_at] that a sign matches; `begin` is a line start and `lineno` its number.
    `ahead`: where the needles of later slices were searched already."""
    counted = begin
    start = end = -1
    signs: dict[int, Sign] = {}

    def flush():
        nonlocal lineno, counted
        lineno += data.count(b"\n", counted, start)
        counted = start
        raw = data[start:min(end, start + MAX_LINE)]
        key = (raw, *signs)
        cached = cache.get(key)
        if cached is None:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            probe = clean_line(raw.decode("utf-8", "replace"))  # as normalise.py says: prefixes, quotes
            cached = cache[key] = (probe, _match_line(probe, [signs[k] for k in sorted(signs)]))
        probe, found = cached
        at = lineno
        if not found:  # a terminal may have broken the message: try the line joined to a neighbour
            probe, at, found = _mend(data, start, end, lineno, probe, [signs[k] for k in sorted(signs)])
        return at, probe.strip(), found, end, lineno, start

    signs_of = _SIGNS_OF
    for pos, stop in ahead.spans(data, begin, stop_at) if ahead else _live_spans(data, begin, stop_at):
        if pos >= end:  # a needle on a new line
            if signs:
                hit = flush()
                if hit[2]:
                    yield hit
            start = data.rfind(b"\n", 0, pos) + 1
            end = data.find(b"\n", pos)
            if end == -1:
                end = len(data)
            signs = {}
        if stop - start > MAX_LINE:  # found beyond the cut: the regexes would not see it
            continue
        for sign in signs_of[data[pos:stop]]:
            signs[_RANK[id(sign)][0]] = sign
    if signs:
        hit = flush()
        if hit[2]:
            yield hit


def _live_spans(data: bytes, begin: int, stop: int) -> Iterable[tuple[int, int]]:
    """Where the needles are in data[begin:stop], searched now."""
    return (m.span() for m in automaton().finditer(data, begin, stop))


AHEAD_MIN = 8 << 20  # a log this large has its later slices searched ahead, by a thread each
AHEAD_SPANS = 1 << 12  # needles a slice keeps at most: a dense slice is read by _dense, not from these


class _Ahead:
    """The needles of a large log's later slices, each slice searched by a thread of its own (a slice
    for each spare CPU) while this thread reads the first: RE2 releases the GIL, so the pass over the text runs on
    every CPU (issue 19). Slices end at line ends and no needle holds a newline (a test checks), so a
    slice's matches, as one search from its start finds them, are those that reading chunk by chunk
    would find."""

    def __init__(self, data: bytes, slices: int, limit: int = AHEAD_SPANS) -> None:
        from concurrent.futures import ThreadPoolExecutor

        cuts = [0]
        for k in range(1, slices):
            at = data.find(b"\n", max(cuts[-1], k * len(data) // slices))
            cuts.append(len(data) if at == -1 else at + 1)
        cuts.append(len(data))
        bounds = [(lo, hi) for lo, hi in zip(cuts[1:-1], cuts[2:]) if lo < hi]
        self._slices = []  # (first byte, end, future of (spans, where they stop being complete))
        if bounds:
            pool = ThreadPoolExecutor(len(bounds), thread_name_prefix="explain-ahead")
            self._slices = [(lo, hi, pool.submit(_search, data, lo, hi, limit)) for lo, hi in bounds]
            pool.shutdown(wait=False)  # the searches run on; `spans` waits for each when it gets there

    def spans(self, data: bytes, begin: int, stop: int) -> Iterable[tuple[int, int]]:
        at = begin
        for lo, hi, future in self._slices:
            if hi <= at or lo >= stop:
                continue
            if at < lo:  # the first slice: this thread's own
                yield from _live_spans(data, at, lo)
                at = lo
            found, complete = future.result()
            upto = min(stop, hi, complete)
            for i in range(bisect_left(found, (at,)), len(found)):
                if found[i][0] >= upto:
                    break
                yield found[i]
            at = max(at, upto)
            end = min(stop, hi)
            if at < end:  # past what the slice kept
                yield from _live_spans(data, at, end)
                at = end
        if at < stop:
            yield from _live_spans(data, at, stop)


def _search(data: bytes, lo: int, hi: int, limit: int) -> tuple[list[tuple[int, int]], int]:
    """The needles' spans in data[lo:hi], at most `limit` of them, and where that list stops being
    every one (a search from there on finds the rest, as this one would have)."""
    found = []
    for m in automaton().finditer(data, lo, hi):
        found.append(m.span())
        if len(found) >= limit:
            return found, m.end()
    return found, hi


class _Ledger:
    """Hits grouped by id the way `group` groups them (a line triggers an id once), built while
    the log is read: an id's first FULL_HITS hits and FULL_TRIGGERS triggering lines are kept
    whole; after that, a dense stretch of the log only counts its lines (`more`) and keeps, for
    each distinct line text, its first and last occurrence (`late`), so that every value a
    named group took, and the last one, are still there for the advice."""

    def __init__(self) -> None:
        self.hits: dict[str, list[Hit]] = {}
        self.late: dict[str, list[Hit]] = {}
        self.triggered: set[tuple[str, int]] = set()
        self.ntrig: Counter[str] = Counter()
        self.more: Counter[str] = Counter()
        # dense state: keys seen, line number of a key's first kept occurrence, of its last one
        self.seen: set[bytes] = set()
        self.first_at: dict[bytes, int] = {}
        self.last_at: dict[bytes, tuple[int, tuple]] = {}
        self.prev_counted: frozenset | None = None  # ids the line before the chunk triggered, when only counted
        self.mends: dict[tuple, tuple] = {}  # (key before or None, key, key after or None) -> _mend's answer
        self.sated: set[tuple[str, bool]] = set()  # (id, trigger) pairs that need no more lines in full

    def add(self, rule: str, at: int, line: str, groups: dict[str, str], trigger: bool) -> None:
        if trigger:
            key = (rule, at)
            if key in self.triggered:
                return
            self.triggered.add(key)
            self.ntrig[rule] += 1
        self.hits.setdefault(rule, []).append(Hit(rule, at, line, dict(groups), trigger))

    def needy(self, rule: str, trigger: bool) -> bool:
        """Does this id still need a line of this kind in full?"""
        return len(self.hits.get(rule, ())) < FULL_HITS or (trigger and self.ntrig[rule] < FULL_TRIGGERS)

    def represent(self, at: int, line: str, entries: tuple) -> None:
        """A counted line kept after all, as the representative of its text."""
        for rule, groups, trigger in entries:
            self.late.setdefault(rule, []).append(Hit(rule, at, line, dict(groups), trigger))
            if trigger:
                self.more[rule] -= 1

    def forget(self) -> None:
        """Keep the last occurrences remembered so far, then start remembering afresh (memory bound)."""
        for key, (at, result) in self.last_at.items():
            if self.first_at.get(key) != at:
                self.represent(at, result[1], result[2])
        self.seen.clear()
        self.first_at.clear()
        self.last_at.clear()

    def matches(self) -> dict[str, Match]:
        self.forget()
        out = {}
        for rule, hits in self.hits.items():
            late = self.late.get(rule)
            if late:
                hits = list(heapq.merge(hits, sorted(late, key=attrgetter("lineno")), key=attrgetter("lineno")))
            if any(h.trigger for h in hits):
                out[rule] = Match(RULES[rule], hits, more=self.more[rule])
        for rule, late in self.late.items():  # an id whose every line came after a full stretch: none
            if rule not in self.hits and any(h.trigger for h in late):
                out[rule] = Match(RULES[rule], sorted(late, key=attrgetter("lineno")), more=self.more[rule])
        return out


_NO_NEEDLE = (0, "", (), frozenset(), frozenset())
_OVERLAPS: tuple | None = None


def _overlaps() -> tuple[tuple[tuple[bytes, int], ...], tuple[bytes, ...], tuple[bytes, ...]]:
    """The needles that could begin inside a runner prefix: (needle, i) where needle[:i] could end
    one, the needles that could lie wholly inside one (normalise.prefix_overlap), and those of them
    that could lie inside a CI timestamp (made of its characters only)."""
    global _OVERLAPS
    if _OVERLAPS is None:
        cuts, inside = [], []
        for needle in NEEDLES:
            lengths, within = prefix_overlap(needle)
            cuts += [(needle, i) for i in lengths]
            if within:
                inside.append(needle)
        _OVERLAPS = (tuple(cuts), tuple(inside), tuple(n for n in inside if set(n) <= STAMP_CHARS))
    return _OVERLAPS


def _key_result(key: bytes) -> tuple:
    """What one line means, from its key: (0, ...) no needle; (1, line, entries, triggered ids);
    (2, probe, signs, ()) needles but no match (each occurrence tries its neighbours).

    A key "\\n" + rest stands for any line of runner prefixes followed by rest: the prefixes are
    ASCII, no needle can begin in them (the dense path checks the few that could), so the needles
    are rest's, and the line as the regexes read it is rest after what `clean_line` would strip
    from there on; "> " + rest gives exactly that.
    """
    if key[:1] == b"\n":
        text = key[1:]
        probe = clean_line("> " + text.decode("utf-8", "replace"))
    else:
        text = key
        probe = clean_line(text.decode("utf-8", "replace"))
    signs: dict[int, Sign] = {}
    for m in automaton().finditer(text):
        for sign in _SIGNS_OF[m.group()]:
            signs[_RANK[id(sign)][0]] = sign
    if not signs:
        return _NO_NEEDLE
    ordered = [signs[k] for k in sorted(signs)]
    found = _match_line(probe, ordered)
    if not found:
        return (2, probe, tuple(ordered), frozenset(), frozenset())
    entries, triggered = [], set()
    for rule, groups, trigger in found:  # a line triggers an id once (as group)
        if trigger:
            if rule in triggered:
                continue
            triggered.add(rule)
        entries.append((rule, groups, trigger))
    return (1, probe.strip(), tuple(entries), frozenset(triggered), frozenset((r, t) for r, _, t in entries))


class _Keys:
    """What each distinct dense line key means (`_key_result`), and the keys sorted into sets so
    that a chunk's work per key is a few C-level set operations on its distinct keys."""

    def __init__(self) -> None:
        self.results: dict[bytes, tuple] = {}
        self.plain: set[bytes] = set()  # no needle
        self.mend: set[bytes] = set()  # needles, no match: each line tries its neighbours
        self.done: set[bytes] = set()  # matched, and no id of theirs needs more lines in full
        self.suspect: set[bytes] = set()  # a needle might begin in the prefixes of such a line

    def learn(self, keys) -> None:
        """Match the keys not met yet (memory bound: past _KEYS_LIMIT, start afresh)."""
        if len(self.results) > _KEYS_LIMIT:
            for remembered in (self.results, self.plain, self.mend, self.done, self.suspect):
                remembered.clear()
        cuts = _overlaps()[0]
        for key in keys - self.results.keys():
            result = self.results[key] = _key_result(key)
            if result[0] == 0:
                self.plain.add(key)
            elif result[0] == 2:
                self.mend.add(key)
            if key[:1] == b"\n" and any(key.startswith(n[i:], 1) for n, i in cuts):
                self.suspect.add(key)


def _keys_of(lines: list[bytes]) -> tuple[list[bytes], bool]:
    """Each line's key: the line itself, or "\\n" + what follows a run of whole runner prefixes;
    and whether every key was cut right after a CI timestamp.

    Where every line of the chunk starts with a CI timestamp of one shape (digits aside), the
    key is cut after it with slices at C speed (a third of the prefix regex's cost); the text
    after it may hold more prefixes, which `_key_result` reads as `clean_line` would. Otherwise
    the prefix pattern cuts each line after all of its prefixes.
    """
    stamp = STAMP_BYTES.match(lines[0])
    if stamp:
        cut = slice(0, stamp.end())
        shape = lines[0][cut].translate(DIGITS_ALIKE)
        if lines[-1][cut].translate(DIGITS_ALIKE) == shape and \
                set(map(bytes.translate, map(getitem, lines, repeat(cut)), repeat(DIGITS_ALIKE))) == {shape}:
            return list(map(add, repeat(b"\n"), map(getitem, lines, repeat(slice(stamp.end(), None))))), True
    return list(map(PREFIXES_BYTES.sub, repeat(b"\n"), lines)), False  # (a partial would cost a third more)


def _dense(data: bytes, begin: int, stop_at: int, base: int, led: _Ledger, known: _Keys) -> tuple[int, int, int] | None:
    """Read data[begin:stop_at] (whole lines, the first numbered `base`) line by line at C speed:
    lines are split, keyed (a line with runner prefixes: "\n" + what follows them), counted, and
    matched once per distinct key. Returns (needle lines, lines, where the chunk ended: at most
    DENSE_LINES lines are read), or None when the chunk must be read the sparse way (a line over
    MAX_LINE)."""
    chunk = data[begin:stop_at]
    lines = chunk.split(b"\n", DENSE_LINES)
    if len(lines) > DENSE_LINES:
        rest = lines.pop()
        if rest:
            chunk = chunk[:len(chunk) - len(rest)]
            stop_at -= len(rest)
    elif lines[-1] == b"":
        lines.pop()
    if not lines or max(map(len, lines)) > MAX_LINE:
        return None
    keys, stamped = _keys_of(lines)
    starts = None  # where each line starts in chunk
    # A needle that begins inside a line's prefixes is in the raw line, not in its key: that line
    # keeps its raw key. One that could lie wholly inside them is looked for in the text before the
    # keys, one line's after another's (where every key was cut after a timestamp, only one made of
    # a timestamp's characters); one that begins inside them and runs on past them, below...
    cuts, inside, inside_stamp = _overlaps()
    wholly = inside_stamp if stamped else inside
    if wholly:
        # (a raw key leaves its line's first byte: shorter than any needle)
        cut_at = list(map(add, map(sub, map(len, lines), map(len, keys)), repeat(1)))
        heads = b"\n".join(map(getitem, lines, map(slice, repeat(None), cut_at)))
        head_starts = None
        for needle in wholly:
            q = heads.find(needle)
            while q != -1:
                if head_starts is None:
                    head_starts = list(map(add, accumulate(cut_at, initial=0), count()))
                index = bisect_right(head_starts, q) - 1
                keys[index] = lines[index]
                q = heads.find(needle, q + 1)
    counts = Counter(keys)
    known.learn(counts.keys())
    # ...one that runs on past them can only where the text after them goes on as it does
    suspects = known.suspect & counts.keys()
    if suspects:
        for index in [i for i, k in enumerate(keys) if k in suspects]:
            line = lines[index]
            end = len(line) - len(keys[index]) + 1  # where the key cut it
            if any(i <= end and line.startswith(n, end - i) for n, i in cuts):
                keys[index] = line
        counts = Counter(keys)
        known.learn(counts.keys())
    results = known.results
    needles = len(keys) - sum(map(counts.__getitem__, known.plain & counts.keys()))
    needy: set[tuple[str, bool]] = set()
    hot = known.mend & counts.keys()
    for key in counts.keys() - known.plain - known.mend - known.done:
        pairs = results[key][4] - led.sated
        for pair in pairs:
            if led.needy(*pair):
                needy.add(pair)
                hot.add(key)
            else:
                led.sated.add(pair)
        if key not in hot:
            known.done.add(key)
    full: Counter[bytes] = Counter()
    last_full = -2
    if hot:
        for i in compress(count(), map(hot.__contains__, keys)):  # the hot lines, found at C speed
            key = keys[i]
            if key not in hot:
                continue
            result = results[key]
            at = base + i
            # the ids the line before triggered when it was only counted (group drops a join's repeat)
            prev = led.prev_counted if i == 0 else None if last_full == i - 1 else results[keys[i - 1]][3]
            last_full = i
            full[key] += 1
            led.seen.add(key)
            if result[0] == 2:
                # joined to a neighbour: the outcome depends on the three lines' keys and on
                # whether the terminal could have wrapped there, so it is worked out once
                mkey = None
                if 0 < i < len(lines) - 1:
                    mkey = (keys[i - 1] if wrap_candidate(lines[i - 1]) else None, key,
                            keys[i + 1] if wrap_candidate(lines[i]) else None)
                mended = led.mends.get(mkey)
                if mended is None:
                    if starts is None:
                        starts = list(map(add, accumulate(map(len, lines), initial=0), count()))
                    start = begin + starts[i]
                    line, at, found = _mend(data, start, start + len(lines[i]), at, result[1], list(result[2]))
                    mended = (line.strip(), at - base - i, found)
                    if mkey is not None:
                        if len(led.mends) >= _CACHE_LIMIT:
                            led.mends.clear()
                        led.mends[mkey] = mended
                line, at, found = mended[0], base + i + mended[1], mended[2]
                for rule, groups, trigger in found:
                    if trigger and prev and at == base + i - 1 and rule in prev:
                        continue  # the line before, only counted, triggered this id already
                    led.add(rule, at, line, groups, trigger)
                continue
            for rule, groups, trigger in result[2]:
                led.add(rule, at, result[1], groups, trigger)
            if not any((r, t) in needy and not led.needy(r, t) for r, _, t in result[2]):
                continue
            # an id of this line has what it needs: drop the keys that only it kept hot
            needy = {p for p in needy if led.needy(*p)}
            hot = {k for k in hot if results[k][0] == 2 or any((r, t) in needy for r, _, t in results[k][2])}
            if not hot:
                break
    # Every other needle line is counted; a key seen for the first time, and each key's last
    # occurrence, are kept as the representatives of their text.
    first = last = None
    for key in counts.keys() - known.plain - known.mend:
        result = results[key]
        n = counts[key] - full.get(key, 0)
        if n <= 0:
            continue
        for rule in result[3]:
            led.more[rule] += n
        if last is None:
            last = dict(zip(keys, range(len(keys))))
        if key not in led.seen:
            if first is None:
                first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
            led.seen.add(key)
            led.first_at[key] = base + first[key]
            led.represent(base + first[key], result[1], result[2])
        led.last_at[key] = (base + last[key], result)
    tail = len(keys) - 1
    led.prev_counted = results[keys[tail]][3] if last_full != tail else None
    if len(led.seen) > _KEYS_LIMIT:
        led.forget()
    return needles, len(lines), stop_at


def collect(data: bytes | str, cpus: int = 1) -> list[Match]:
    """`group(scan(data))` in one pass, for any size of log: a stretch where needle lines are
    dense is read with `_dense`, and an id's lines beyond what the report shows are counted.
    `cpus`: how many CPUs a log of AHEAD_MIN bytes or more may be searched on (at most 8; the
    caller knows them, doctor.host.Host.usable_cpus); the matches are the same for any number."""
    data = to_bytes(data)
    led = _Ledger()
    cache: dict = {}
    known = _Keys()
    ahead = _Ahead(data, min(cpus, 8)) if cpus > 1 and len(data) >= AHEAD_MIN else None
    n, begin, lineno = len(data), 0, 1
    sparse, dense = CHUNK, 0  # the next chunk's size each way; dense is 0 while reading sparse
    while begin < n:
        stop_at = data.find(b"\n", begin + (dense or sparse))
        stop_at = n if stop_at == -1 else stop_at + 1
        read = _dense(data, begin, stop_at, lineno, led, known) if dense else None
        if read is not None:
            needles, next_lineno, stop_at = read[0], lineno + read[1], read[2]
        else:
            needles, next_lineno, counted = 0, lineno, begin
            for at, line, found, end, own, start in _needle_lines(data, begin, stop_at, lineno, cache, ahead):
                needles += 1
                next_lineno, counted = own, start
                for rule, groups, trigger in found:
                    led.add(rule, at, line, groups, trigger)
                if needles >= 64 and needles * DENSE >= end - begin:  # dense from here: stop after this line
                    stop_at = min(end + 1, n)
                    break
            next_lineno += data.count(b"\n", counted, stop_at)
            led.prev_counted = None
        # dense (a needle line per DENSE bytes): read the next chunk line by line, a larger one each
        # time it stays dense; sparse chunks grow the same way
        if needles * DENSE >= stop_at - begin:
            dense, sparse = min(2 * dense or CHUNK, DENSE_CHUNK), CHUNK
        else:
            dense, sparse = 0, min(2 * sparse, DENSE_CHUNK)
        lineno, begin = next_lineno, stop_at
    return _fold(led.matches())


def _fold(matches: dict[str, Match]) -> list[Match]:
    """Consequences folded into their cause; root cause first."""
    for cause in sorted(matches, key=ORDER.__getitem__):
        if cause not in matches:
            continue
        for consequence in matches[cause].rule.explains:
            if consequence in matches:
                matches[cause].folded.append(matches.pop(consequence))
    return sorted(matches.values(), key=lambda m: ORDER[m.rule.id])


def group(hits: Iterable[Hit]) -> list[Match]:
    """Hits → one Match per id that has a triggering hit; consequences folded; root cause first.

    One dictionary pass: a line counts once per id as a trigger (a second triggering sign on
    the same line adds nothing), context hits are all kept.
    """
    by_id: dict[str, Match] = {}
    triggered: set[tuple[str, int]] = set()
    for h in hits:
        m = by_id.get(h.rule)
        if m is None:
            m = by_id[h.rule] = Match(RULES[h.rule])
        if h.trigger:
            key = (h.rule, h.lineno)
            if key in triggered:
                continue
            triggered.add(key)
        m.hits.append(h)
    return _fold({i: m for i, m in by_id.items() if any(h.trigger for h in m.hits)})


def explain_text(text: str | bytes, facts=None, source: str = "log") -> list[Finding]:
    """The findings a log proves, root cause first; [] when it shows no known setup problem.

    `text` is the log as read (bytes, any encoding: only hit lines are decoded, as UTF-8 with
    replacement) or as str. `facts` (doctor.explain.facts.MachineFacts) makes the advice
    concrete for this machine.
    """
    return findings(find(text, facts), facts, source)


def find(text: str | bytes, facts=None, cpus: int = 1) -> list[Match]:
    """What the log proves, one Match per diagnosis id, root cause first; `facts` only choose
    between look-alikes (doctor/explain/disambiguate.py); `cpus` as for `collect`."""
    data = normalise(text)
    return settle(collect(data, cpus), data, facts)


def findings(matches: list[Match], facts=None, source: str = "log") -> list[Finding]:
    out = []
    for m in matches:
        finding = to_finding(m, advise(m, facts), source)
        if m.chosen_by:
            finding.detail += "\n" + m.chosen_by
            finding.evidence.append(Evidence("derived", "chosen by", m.chosen_by.removeprefix("chosen by: ")))
        out.append(finding)
    return out


def settle(matches: list[Match], data: bytes, facts) -> list[Match]:
    """Give each look-alike pair (doctor/explain/disambiguate.py) the id the evidence chooses; each
    such match says in `chosen_by` which evidence chose it, or that none could. An abi.mismatch whose
    own lines show that libtorch is not linked at all is not named (disambiguate.not_linked)."""
    from doctor.explain.disambiguate import LOOK_ALIKES, NOT_LINKED, not_linked

    matches = [m for m in matches if m.rule.id != NOT_LINKED or not not_linked(m)]
    for look_alikes in LOOK_ALIKES:
        matches = _settle_pair(matches, data, facts, look_alikes)
    return matches


def _settle_pair(matches: list[Match], data: bytes, facts, look_alikes) -> list[Match]:
    ids = look_alikes.ids
    pair = [m for m in matches if m.rule.id in ids]
    lines = [h.line for m in pair for h in (*m.hits, *(h for f in m.folded for h in f.hits))]
    if not pair or not look_alikes.ambiguous(lines):
        return matches
    hits = sorted((h for m in pair for h in (*m.hits, *(h for f in m.folded if f.rule.id in ids for h in f.hits))),
                  key=lambda h: h.lineno)
    decision = look_alikes.decide(data, facts, hits)
    out = []
    for m in matches:
        if m.rule.id not in ids:
            out.append(m)
            continue
        if decision is None:
            m.chosen_by = look_alikes.undecided
            out.append(m)
            continue
        hits = m.hits + [h for f in m.folded if f.rule.id in ids for h in f.hits]
        folded = [f for f in m.folded if f.rule.id not in ids]
        more = m.more + sum(f.more for f in m.folded if f.rule.id in ids)
        out.append(Match(RULES[decision.id], sorted(hits, key=lambda h: h.lineno), folded,
                         chosen_by=f"chosen by: {decision.evidence}", more=more))
    return sorted(out, key=lambda m: ORDER[m.rule.id])


def to_finding(match: Match, advice, source: str) -> Finding:
    hits = match.triggers
    shown = [f"line {h.lineno}: {_clip(h.line)}" for h in hits[:SHOWN]]
    rest = len(hits) + match.more - SHOWN
    if rest > 0:
        shown.append(f"... and {rest} more line{'s' * (rest != 1)} like these")
    for f in match.folded:
        first = f.triggers[0]
        shown.append(f"explains line {first.lineno} too ({f.rule.id}): {_clip(first.line)}")
    detail = "\n".join([*shown, *advice.detail])
    evidence = [Evidence("log", f"{source}:{h.lineno}", _clip(h.line, 300)) for h in match.hits[:20]]
    for f in match.folded:
        evidence += [Evidence("log", f"{source}:{h.lineno}", _clip(h.line, 300)) for h in f.triggers[:3]]
    evidence += advice.evidence
    return Finding(
        id=match.rule.id,
        level=Level.ERROR,
        title=advice.title,
        detail=detail,
        fix=advice.fix,
        area="explain",
        evidence=evidence,
        subject=advice.subject,
    )


_clip = clip
