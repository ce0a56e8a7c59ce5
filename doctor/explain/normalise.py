"""Read a log as people paste it: the text the patterns see, line for line with the original.

Logs reach `doctor explain` through terminals, CI runners, torchrun, Docker BuildKit and issue
trackers, each of which dresses the lines the tools printed. The engine undoes that without
moving a line, so a finding's line numbers are the log's own:

- `clean` (whole log, only when needed): ANSI colour codes go; CR LF and a lone CR (progress
  bars) both end a line.
- `clean_line` (only the lines a needle hit, so a 100 MB log is never copied): a prefix a
  runner put before the tool's text goes: CI timestamps (`2024-05-01T10:11:12.1234Z`),
  torchrun's `[rank3]:` / `[default0]:`, BuildKit's `#12 45.6`, GitHub's `##[error]`, a log
  viewer's `[1763]`, cargo's `cargo:warning=`, `> ` quote markers, in any combination; and
  typographic quotes (‘ ’ “ ” and their low/reversed forms) become ASCII ones.
- `quote_variants`: the needles (literal prefilters, matched on the raw log) get their
  typographic twins, so a pasted ‘torch/torch.h’ is found before it is mended.
- `wrap_candidate`: a needle line no regex matched is tried joined to the line before or after
  it when that line could have been broken by a terminal or tracker (long, ends mid-text or in
  one blank): a path split across two lines, `Error loading "…fbgemm.dll"` broken after the
  quote, R's ``version `GLIBCXX_3.4.20' `` ending one line and `not found` starting the next.
  The hit keeps the first line's number.

A cut-off line ("No such file or dire") needs nothing here: the patterns match on what is there.
"""

from __future__ import annotations

import re

ANSI = re.compile(rb"\x1b(?:\[[0-9;?]*+[A-Za-z]|\][^\x07\x1b\n]*+\x07)")
# One runner prefix; `clean_line` strips any run of them at the line start. Each alternative
# is a literal start followed by bounded classes, so a line costs a few steps.
_STAMP = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?Z?[ \t]"  # CI timestamp
_PREFIX = (
    _STAMP
    + r"|\[(?:rank|default)\d{1,6}\]:[ \t]?"  # torchrun --tee / local_ranks_filter
    r"|#\d{1,5}[ \t]\d{1,6}\.\d{1,3}[ \t]"  # Docker BuildKit step and seconds
    r"|##\[[a-z]{1,10}\]"  # GitHub Actions annotations
    r"|\[\d{1,7}\][ \t]"  # a log viewer's line numbers
    r"|cargo:warning="  # a build script's compiler output
    r"|>[ \t]?"  # quote markers (e-mail, Markdown)
)
PREFIXES = re.compile(r"^[ \t]*(?:" + _PREFIX + r")+")
# The same prefixes on raw bytes (ASCII digits only): the engine's dense path keys a line by what
# follows them, so that 500,000 lines that differ only in their timestamps are matched once.
PREFIXES_BYTES = re.compile(PREFIXES.pattern.encode())
# The first prefix alone (the CI timestamp, what most prefixed logs carry), and digits made alike:
# every digit in these patterns is a \d, so lines equal but for their digits match alike.
STAMP_BYTES = re.compile(_STAMP.encode())
DIGITS_ALIKE = bytes.maketrans(b"0123456789", b"0000000000")
QUOTES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "‟": '"'})
# A wrapped line is long and ends mid-text (a terminal's break) or in one blank (a word wrap, as R
# prints its messages); shorter lines, and lines padded with blanks, are never joined.
WRAP_MIN = 60
# A superset of every tail of one prefix, and of every head: a needle that could begin inside
# a prefix (found in the raw line, not in the text after the prefixes) is one the dense path
# looks at occurrence by occurrence (prefix_overlap).
_TAIL = (rb"(?:[0-9T:.,Z -]*[ \t]|(?:\[?(?:r?a?n?k?|d?e?f?a?u?l?t?)[0-9]{0,6}\])?:[ \t]?|[#0-9 \t.]*[ \t]"
         rb"|#?#?\[?[a-z]{0,10}\]|\[?[0-9]{0,7}\][ \t]"
         rb"|(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:c?a)?r)?g)?o)?:)?w)?a)?r)?n)?i)?n)?g)?=)|>[ \t]?|[ \t]+)")
_HEAD = (rb"(?:[0-9T:.,Z -]*|\[[a-z]{0,7}[0-9]{0,6}\]?:?|#[0-9 \t.]*|##?\[?[a-z]{0,10}|\[[0-9]{0,7}\]?"
         rb"|c(?:a(?:r(?:g(?:o(?::(?:w(?:a(?:r(?:n(?:i(?:n(?:g)?)?)?)?)?)?)?)?)?)?)?)?|>)")
_STRADDLE = re.compile(_TAIL + rb"(?:" + _PREFIX.encode() + rb")*")
_INSIDE = re.compile(rb"(?:" + _TAIL + rb")?(?:" + _PREFIX.encode() + rb")*" + _HEAD + rb"?")
_ALT_CHARS = tuple(frozenset(c) for c in (b"0123456789T:.,Z \t-", b"[rankdefault0123456789]: \t", b"#0123456789 \t.",
                                          b"#[abcdefghijklmnopqrstuvwxyz]", b"[0123456789] \t", b"cargo:warning=",
                                          b"> \t"))


def clean(data: bytes) -> bytes:
    """The log with colour codes off and every line end a LF; same lines, same numbers.

    Whole-log work is kept to what needs it (ESC or CR present): a 100 MB log is not copied.
    """
    if b"\x1b" in data:
        data = ANSI.sub(b"", data)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def clean_line(line: str) -> str:
    """One line as the tool printed it: runner prefixes off, typographic quotes ASCII."""
    if line[:1] in "0123456789[#>c \t":
        line = PREFIXES.sub("", line, count=1)
    # translate() walks the line char by char through a dict: skip it where no quote can be
    return line if line.isascii() else line.translate(QUOTES)


def quote_variants(needle: str) -> tuple[str, ...]:
    """A needle and its typographic twins: the automaton runs on the raw log, where a pasted
    ‘torch/torch.h’ has not been mended yet."""
    if "'" not in needle and '"' not in needle:
        return (needle,)
    out = [needle]
    for single, double in (("‘", "“"), ("’", "”")):
        out.append(needle.replace("'", single).replace('"', double))
    # an opening and a closing quote in one needle: ‘…’ / “…”
    opened = re.sub(r"'([^']*)'", "‘\\1’", needle)
    opened = re.sub(r'"([^"]*)"', "“\\1”", opened)
    out.append(opened)
    return tuple(dict.fromkeys(out))


def wrap_candidate(line: bytes) -> bool:
    """Could a terminal have broken this line at its end, or a word wrap after its last blank?"""
    return len(line) >= WRAP_MIN and line[-2:] not in (b"  ", b" \t", b"\t ", b"\t\t")


def prefix_overlap(needle: bytes) -> tuple[tuple[int, ...], bool]:
    """How a needle could begin inside a runner prefix (found in the raw line, not in the text
    after the prefixes): the lengths i for which needle[:i] could end a prefix (the needle runs
    on past it), and whether it could lie wholly inside one. Supersets."""
    cuts = tuple(i for i in range(1, len(needle)) if _STRADDLE.fullmatch(needle[:i]))
    inside = (bool(_STRADDLE.fullmatch(needle)) or bool(_INSIDE.fullmatch(needle))
              or any(set(needle) <= chars for chars in _ALT_CHARS))
    return cuts, inside
