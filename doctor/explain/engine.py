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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from doctor.explain.advisors import advise
from doctor.explain.normalise import clean_line, wrap_candidate
from doctor.explain.patterns import ORDER, RULES, TABLE, Rule, Sign
from doctor.formats import clip
from doctor.model import Evidence, Finding, Level

MAX_LINE = 4000  # a line longer than this (bytes) is cut before regexes see it
SHOWN = 5  # proving lines shown per finding; the rest are counted
_CACHE_LIMIT = 4096  # distinct hit lines remembered; identical lines are matched once


def _needle_table() -> tuple[dict[bytes, tuple[Sign, ...]], dict[int, tuple[int, Rule]], list[bytes]]:
    """needle (UTF-8) -> every sign it implies, in the order the table lists them.

    A needle that contains another needle implies that one's signs too: the automaton reports
    the longest needle at a position, never the shorter ones inside it.
    """
    order: dict[bytes, list[tuple[int, Sign]]] = {}
    rank: dict[int, tuple[int, Rule]] = {}
    n = 0
    for rule in TABLE:
        for sign in rule.signs:
            rank[id(sign)] = (n, rule)
            n += 1
            for needle in sign.needles:
                order.setdefault(needle.encode(), []).append((rank[id(sign)][0], sign))
    implied: dict[bytes, tuple[Sign, ...]] = {}
    for needle in order:
        signs = {id(s): (i, s) for other, pairs in order.items() if other in needle for i, s in pairs}
        implied[needle] = tuple(s for _, s in sorted(signs.values(), key=lambda p: p[0]))
    return implied, rank, sorted(order, key=len, reverse=True)


_SIGNS_OF, _RANK, NEEDLES = _needle_table()
_BY_NEEDLE = {n.decode(): s for n, s in _SIGNS_OF.items()}  # for tests: the needles as text
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


@dataclass
class Match:
    """Everything the log says about one diagnosis id."""

    rule: Rule
    hits: list[Hit] = field(default_factory=list)
    folded: list[Match] = field(default_factory=list)  # consequences this cause explains
    chosen_by: str = ""  # for a look-alike pair: which evidence chose this id (settle)

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
    """The log as the patterns read it, line for line (doctor/explain/normalise.py): colour
    codes, CR line ends, runner prefixes and typographic quotes taken off."""
    from doctor.explain.normalise import clean

    return clean(to_bytes(data))


def _match_line(probe: str, signs: Iterable[Sign]) -> list[tuple[str, dict[str, str], bool]]:
    found = []
    for sign in signs:
        m = sign.regex.search(probe)
        if m:
            found.append((_RANK[id(sign)][1].id, {k: v for k, v in m.groupdict().items() if v}, sign.trigger))
    return found


def _mend(data: bytes, start: int, end: int, lineno: int, probe: str, signs: list[Sign]):
    """A needle line no regex matched, joined to the line before or after it where a terminal
    or tracker could have wrapped there (normalise.wrap_candidate); (line, its number, matches)."""
    if start > 0:
        before = data.rfind(b"\n", 0, start - 1) + 1
        prev = data[before:start - 1][-MAX_LINE:]
        if wrap_candidate(prev):
            joined = clean_line(prev.decode("utf-8", "replace")) + probe
            found = _match_line(joined, signs)
            if found:
                return joined, lineno - 1, found
    if end < len(data) and wrap_candidate(data[start:end]):
        after = data.find(b"\n", end + 1)
        nxt = data[end + 1:after if after != -1 else len(data)][:MAX_LINE]
        joined = probe + clean_line(nxt.decode("utf-8", "replace"))
        found = _match_line(joined, signs)
        if found:
            return joined, lineno, found
    return probe, lineno, []


def scan(data: bytes | str) -> list[Hit]:
    """All lines that match a sign, in log order. `data` should be normalised."""
    data = to_bytes(data)
    hits: list[Hit] = []
    cache: dict[tuple, tuple[str, list[tuple[str, dict[str, str], bool]]]] = {}
    lineno, counted = 1, 0
    start = end = -1
    signs: dict[int, Sign] = {}

    def flush() -> None:
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
        if found:
            line = probe.strip()
            for rule, groups, trigger in found:
                hits.append(Hit(rule, at, line, dict(groups), trigger))

    signs_of = _SIGNS_OF
    for m in automaton().finditer(data):
        pos, stop = m.span()
        if pos >= end:  # a needle on a new line
            if signs:
                flush()
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
        flush()
    return hits


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
    matches = {i: m for i, m in by_id.items() if any(h.trigger for h in m.hits)}
    for cause in sorted(matches, key=ORDER.__getitem__):
        if cause not in matches:
            continue
        for consequence in matches[cause].rule.explains:
            if consequence in matches:
                matches[cause].folded.append(matches.pop(consequence))
    return sorted(matches.values(), key=lambda m: ORDER[m.rule.id])


def explain_text(text: str | bytes, facts=None, source: str = "log") -> list[Finding]:
    """The findings a log proves, root cause first; [] when it shows no known setup problem.

    `text` is the log as read (bytes, any encoding: only hit lines are decoded, as UTF-8 with
    replacement) or as str. `facts` (doctor.explain.facts.MachineFacts) makes the advice
    concrete for this machine.
    """
    return findings(find(text, facts), facts, source)


def find(text: str | bytes, facts=None) -> list[Match]:
    """What the log proves, one Match per diagnosis id, root cause first; `facts` only choose
    between look-alikes (doctor/explain/disambiguate.py)."""
    data = normalise(text)
    return settle(group(scan(data)), data, facts)


def findings(matches: list[Match], facts=None, source: str = "log") -> list[Finding]:
    out = []
    for m in matches:
        finding = to_finding(m, advise(m, facts), source)
        if m.chosen_by:
            finding.detail += "\n" + m.chosen_by
            finding.evidence.append(Evidence("derived", "chosen by", m.chosen_by))
        out.append(finding)
    return out


def settle(matches: list[Match], data: bytes, facts) -> list[Match]:
    """Give a look-alike pair (doctor/explain/disambiguate.py) the id the evidence chooses; each
    such match says in `chosen_by` which evidence chose it, or that none could."""
    from doctor.explain.disambiguate import PAIR, ambiguous, decide

    pair = [m for m in matches if m.rule.id in PAIR]
    lines = [h.line for m in pair for h in (*m.hits, *(h for f in m.folded for h in f.hits))]
    if not pair or not ambiguous(lines):
        return matches
    decision = decide(data, facts)
    out = []
    for m in matches:
        if m.rule.id not in PAIR:
            out.append(m)
            continue
        if decision is None:
            m.chosen_by = ("chosen by: the table's order; neither this machine's facts nor the log show whether "
                           "the libtorch is a CPU or a CUDA build")
            out.append(m)
            continue
        hits = m.hits + [h for f in m.folded if f.rule.id in PAIR for h in f.hits]
        folded = [f for f in m.folded if f.rule.id not in PAIR]
        out.append(Match(RULES[decision.id], sorted(hits, key=lambda h: h.lineno), folded,
                         chosen_by=f"chosen by: {decision.evidence}"))
    return sorted(out, key=lambda m: ORDER[m.rule.id])


def to_finding(match: Match, advice, source: str) -> Finding:
    hits = match.triggers
    shown = [f"line {h.lineno}: {_clip(h.line)}" for h in hits[:SHOWN]]
    if len(hits) > SHOWN:
        shown.append(f"... and {len(hits) - SHOWN} more line{'s' * (len(hits) - SHOWN != 1)} like these")
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
