"""One pass over a log: find the lines the pattern table knows, group them by diagnosis,
fold consequences into their cause, and order the findings root cause first.

Speed: every needle of the table is looked for with str.find over the whole text (C speed,
a few ms per MB); only the lines that hold a needle meet a regex. Line numbers come from
counting newlines between those lines, never from splitting the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from doctor.explain.advice import advise
from doctor.explain.patterns import ORDER, RULES, TABLE, Rule, Sign
from doctor.formats import clip
from doctor.model import Evidence, Finding, Level

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
MAX_LINE = 4000  # a single line longer than this is cut before regexes see it
SHOWN = 5  # proving lines shown per finding; the rest are counted

# needle -> the signs that need it, built once
_BY_NEEDLE: dict[str, list[tuple[Rule, Sign]]] = {}
for _rule in TABLE:
    for _sign in _rule.signs:
        for _needle in _sign.needles:
            _BY_NEEDLE.setdefault(_needle, []).append((_rule, _sign))


@dataclass(frozen=True)
class Hit:
    """One log line that matched one sign."""

    rule: str
    lineno: int  # 1-based
    line: str
    groups: dict[str, str]
    trigger: bool


@dataclass
class Match:
    """Everything the log says about one diagnosis id."""

    rule: Rule
    hits: list[Hit] = field(default_factory=list)
    folded: list[Match] = field(default_factory=list)  # consequences this cause explains

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


def normalise(text: str) -> str:
    """Strip colour codes (gcc/clang/cargo colour their diagnostics) and carriage returns."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def scan(text: str) -> list[Hit]:
    """All lines that match a sign, in log order. `text` should be normalised."""
    starts: dict[int, list[str]] = {}  # line start -> the needles found on that line
    for needle in _BY_NEEDLE:
        i = text.find(needle)
        while i != -1:
            start = text.rfind("\n", 0, i) + 1
            starts.setdefault(start, []).append(needle)
            end = text.find("\n", i)
            if end == -1:
                break
            i = text.find(needle, end)
    hits: list[Hit] = []
    lineno, last = 1, 0
    for start in sorted(starts):
        lineno += text.count("\n", last, start)
        last = start
        end = text.find("\n", start)
        line = text[start:] if end == -1 else text[start:end]
        probe = line[:MAX_LINE]
        seen: set[int] = set()
        for needle in starts[start]:
            if needle not in probe:  # found beyond MAX_LINE
                continue
            for rule, sign in _BY_NEEDLE[needle]:
                if id(sign) in seen:
                    continue
                seen.add(id(sign))
                m = sign.regex.search(probe)
                if m:
                    groups = {k: v for k, v in m.groupdict().items() if v}
                    hits.append(Hit(rule.id, lineno, line.strip(), groups, sign.trigger))
    return hits


def group(hits: Iterable[Hit]) -> list[Match]:
    """Hits → one Match per id that has a triggering hit; consequences folded; root cause first."""
    by_id: dict[str, Match] = {}
    for h in hits:
        m = by_id.setdefault(h.rule, Match(RULES[h.rule]))
        if not any(x.lineno == h.lineno and x.trigger for x in m.hits) or not h.trigger:
            m.hits.append(h)
    matches = {i: m for i, m in by_id.items() if m.triggers}
    for cause in sorted(matches, key=ORDER.__getitem__):
        if cause not in matches:
            continue
        for consequence in matches[cause].rule.explains:
            if consequence in matches:
                matches[cause].folded.append(matches.pop(consequence))
    return sorted(matches.values(), key=lambda m: ORDER[m.rule.id])


def explain_text(text: str, facts=None, source: str = "log") -> list[Finding]:
    """The findings a log proves, root cause first; [] when it shows no known setup problem.

    `facts` (doctor.explain.facts.MachineFacts) makes the advice concrete for this machine.
    """
    return findings(find(text), facts, source)


def find(text: str) -> list[Match]:
    """What the log proves, one Match per diagnosis id, root cause first."""
    return group(scan(normalise(text)))


def findings(matches: list[Match], facts=None, source: str = "log") -> list[Finding]:
    return [to_finding(m, advise(m, facts), source) for m in matches]


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
