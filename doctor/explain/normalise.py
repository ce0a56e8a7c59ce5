"""Read a log as people paste it: the text the patterns see, line for line with the original.

Logs reach `doctor explain` through terminals, CI runners, torchrun, Docker BuildKit and issue
trackers, each of which dresses the lines the tools printed. The engine undoes that without
moving a line, so a finding's line numbers are the log's own:

- `clean` (whole log, only when needed): terminal escape sequences go (ECMA-48: a CSI with any
  parameters, `ESC[38:5:196m` colon colours included; nF escapes such as tput sgr0's `ESC ( B`;
  OSC/DCS/SOS/PM/APC strings ended by BEL or ST, such as GCC's OSC 8 links round a diagnostic's
  URL; single-character escapes); CR LF and a lone CR (progress bars) both end a line.
- `clean_line` (only the lines a needle hit, so a 100 MB log is never copied): a UTF-8
  byte-order mark goes, and so does a prefix a runner put before the tool's text: CI timestamps
  (`2024-05-01T10:11:12.1234Z`) and GitLab Runner's stream header after them (`00O `), Jenkins
  Timestamper's `[2024-05-01T10:11:12.123Z]` and `10:11:12`, docker compose's `svc  | `,
  torchrun's `[rank3]:` / `[default0]:`, BuildKit's `#12 45.6`, GitHub's `##[error]`, a log
  viewer's `[1763]`, cargo's `cargo:warning=`, `> ` quote markers, in any combination; and
  typographic quotes (‘ ’ “ ” and their low/reversed forms) become ASCII ones.
- `quote_variants`: the needles (literal prefilters, matched on the raw log) get their
  typographic twins, so a pasted ‘torch/torch.h’ is found before it is mended.
- `wrap_candidate`: a needle line no regex matched is tried joined to the line before or after
  it when that line could have been broken by a terminal or tracker (long, ends mid-text or in
  one blank): a path split across two lines, `Error loading "…fbgemm.dll"` broken after the
  quote, R's ``version `GLIBCXX_3.4.20' `` ending one line and `not found` starting the next.
  The hit keeps the first line's number; the indentation both lines start with is dropped from the
  second (`join_wrapped`).

A cut-off line ("No such file or dire") needs nothing here: the patterns match on what is there.

Before all of it, `utf8` reads a log written in a wide encoding as the UTF-8 it stands for:
PowerShell 5.1's `make > build.log` writes UTF-16LE with a byte-order mark, and the patterns,
which look for ASCII words, found nothing in it.
"""

from __future__ import annotations

import re

# ECMA-48 (5th ed.) 5.3-5.6 and ISO 2022: CSI = ESC [, parameter bytes 0x30-0x3F (digits, `:` `;` `<=>?`),
# intermediate bytes 0x20-0x2F, one final byte 0x40-0x7E; a control string (OSC ESC ], DCS ESC P, SOS ESC X,
# PM ESC ^, APC ESC _) runs to ST (ESC \\) or, for OSC, xterm's BEL; an nF escape is intermediates and a
# final byte 0x30-0x7E (`ESC ( B`); any other escape is one byte 0x30-0x7E. None spans a line end.
ANSI = re.compile(rb"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|[\]PX^_][^\x07\x1b\n]*+(?:\x07|\x1b\\)|[ -/]++[0-~]|[0-~])")
# One runner prefix; `clean_line` strips any run of them at the line start. Each alternative
# is a literal start followed by bounded classes, so a line costs a few steps. ASCII classes only
# (no \w): PREFIXES_BYTES below must not strip more of a line than PREFIXES does.
_STAMP = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?Z?[ \t]"  # CI timestamp (GitHub Actions, Azure)
_PREFIX = (
    _STAMP
    # Jenkins Timestamper plugin, Pipeline builds: '[' yyyy-MM-dd'T'HH:mm:ss.SSS'Z' '] ' before every line
    # (jenkinsci/timestamper-plugin, pipeline/GlobalDecorator.java)
    + r"|\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z\][ \t]"
    # ... and its console view, copied from the page: system clock HH:mm:ss (the default) or elapsed
    # HH:mm:ss.S, then a blank or two (timestamper-plugin README: "21:51:15  Started by user anonymous")
    r"|\d\d:\d\d:\d\d(?:\.\d{1,3})?[ \t]{1,2}"
    # docker compose up / logs: the container name padded to the longest one, then ' | ' (docker/compose
    # cmd/formatter/logs.go, presenter.setPrefix: "%-*s | "); a name starts with a letter (a compiler's
    # source excerpt, "  12 | #include …", starts with digits)
    r"|[A-Za-z][A-Za-z0-9_.-]{0,127} {1,64}\|[ \t]"
    # GitLab Runner's FF_TIMESTAMPS header after its timestamp: the stream number (2 hex digits), O or E
    # (stdout, stderr), then '+' for a continued line or ' ' (gitlab-org/gitlab lib/gitlab/ci/trace/stream.rb,
    # TIMESTAMP_HEADER_REGEX). A prefix of its own, not part of _STAMP: the dense path cuts a line after its
    # timestamp and strips what follows as clean_line would, so each prefix must strip alone.
    r"|[0-9a-f]{2}[EO][+ ]"
    r"|\[(?:rank|default)\d{1,6}\]:[ \t]?"  # torchrun --tee / local_ranks_filter
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
STAMP_CHARS = frozenset(b"0123456789T:.,Z \t-")  # every byte a match of STAMP_BYTES can hold
DIGITS_ALIKE = bytes.maketrans(b"0123456789", b"0000000000")
QUOTES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "‟": '"'})
# A wrapped line is long and ends mid-text (a terminal's break) or in one blank (a word wrap, as R
# prints its messages); shorter lines, and lines padded with blanks, are never joined.
WRAP_MIN = 60
# A superset of every tail of one prefix, and of every head: a needle that could begin inside
# a prefix (found in the raw line, not in the text after the prefixes) is one the dense path
# looks at occurrence by occurrence (prefix_overlap).
_TAIL = (rb"(?:[0-9T:.,Z -]*[ \t]|(?:[0-9a-f]{0,2}[EO])?[+ ]|\[?[0-9T:.,Z-]*\][ \t]"
         rb"|(?:\[?(?:r?a?n?k?|d?e?f?a?u?l?t?)[0-9]{0,6}\])?:[ \t]?|[#0-9 \t.]*[ \t]|#?#?\[?[a-z]{0,10}\]"
         rb"|[A-Za-z0-9_.-]* *\|[ \t]"
         rb"|(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:(?:c?a)?r)?g)?o)?:)?w)?a)?r)?n)?i)?n)?g)?=)|>[ \t]?|[ \t]+)")
_HEAD = (rb"(?:[0-9T:.,Z \t-]*|[0-9a-f]{1,2}[EO]?|\[[0-9T:.,Z-]*\]?|\[[a-z]{0,7}[0-9]{0,6}\]?:?|#[0-9 \t.]*"
         rb"|##?\[?[a-z]{0,10}|[A-Za-z][A-Za-z0-9_.-]* *\|?"
         rb"|c(?:a(?:r(?:g(?:o(?::(?:w(?:a(?:r(?:n(?:i(?:n(?:g)?)?)?)?)?)?)?)?)?)?)?)?|>)")
_STRADDLE = re.compile(_TAIL + rb"(?:" + _PREFIX.encode() + rb")*")
_INSIDE = re.compile(rb"(?:" + _TAIL + rb")?(?:" + _PREFIX.encode() + rb")*" + _HEAD + rb"?")
# What could lie inside one prefix, touching neither of its ends: its characters (a docker compose
# name's are most of ASCII, so that one is its shape instead)
_ALT_CHARS = (STAMP_CHARS, *(frozenset(c) for c in (b"[]0123456789T:.,Z \t-", b"0123456789abcdefEO+ ",
                                                    b"[rankdefault0123456789]: \t", b"#0123456789 \t.",
                                                    b"#[abcdefghijklmnopqrstuvwxyz]", b"[0123456789] \t",
                                                    b"cargo:warning=", b"> \t")))
_MIDDLE = re.compile(rb"[A-Za-z0-9_.-]* *(?:\|[ \t]?)?")


# Byte-order marks, the longer first (UTF-32LE's starts with UTF-16LE's): the codec that reads
# the mark and drops it, the width of a character, and whether it is little-endian.
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32", 4, True), (b"\x00\x00\xfe\xff", "utf-32", 4, False),
         (b"\xff\xfe", "utf-16", 2, True), (b"\xfe\xff", "utf-16", 2, False))
UTF8_BOM = b"\xef\xbb\xbf"
SNIFF = 4096  # bytes looked at for the NULs of ASCII text in a wide encoding
_DECODE_CHUNK = 1 << 20


def _nul_shares(head: bytes, width: int) -> list[float] | None:
    """For each byte of a `width`-byte character, the share of NUL bytes there in `head`."""
    end = len(head) // width * width
    return [head[i:end:width].count(0) * width / end for i in range(width)] if end else None


def wide_encoding(data: bytes) -> str | None:
    """The codec of a log in UTF-16 or UTF-32, "utf-8" for UTF-8 with a byte-order mark, None for
    any other log (read as its bytes). A wide log is told by its mark, or, without one, by ASCII's
    NULs in the first SNIFF bytes: one lane of bytes holds the letters, the others (almost) only
    NUL. A mark is believed only when some of those NULs follow it: a binary log may start with
    FF FE."""
    if data.startswith(UTF8_BOM):
        return "utf-8"
    for mark, codec, width, little in _BOMS:
        if data.startswith(mark):
            nul = _nul_shares(data[len(mark):len(mark) + SNIFF], width)
            if nul is None or min(nul[1:] if little else nul[:-1]) > 0.25:
                return codec
            break
    head = data[:SNIFF]
    if len(head) < 8 or head.count(0) * 4 < len(head):  # most logs: no NUL at all
        return None
    for width, little, big in ((4, "utf-32-le", "utf-32-be"), (2, "utf-16-le", "utf-16-be")):
        nul = _nul_shares(head, width)
        if nul[0] < 0.05 and min(nul[1:]) > 0.7:
            return little
        if nul[-1] < 0.05 and min(nul[:-1]) > 0.7:
            return big
    return None


# Archives a log is kept in (CI artifacts, rotated logs), by their first bytes: the format, the
# command that prints the text inside, the usual suffix. bzip2's magic is "BZh" and a block size,
# then a block or the end of the stream, so that a log starting with "BZh1" is still a log.
_COMPRESSED = ((re.compile(rb"\x1f\x8b"), "gzip", "zcat", ".gz"),
               (re.compile(rb"\xfd7zXZ\x00"), "xz", "xzcat", ".xz"),
               (re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)"), "bzip2", "bzcat", ".bz2"),
               (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd", "zstdcat", ".zst"),
               (re.compile(rb"PK(?:\x03\x04|\x05\x06|\x07\x08)"), "zip", "unzip -p", ".zip"))


def compressed(data: bytes) -> tuple[str, str, str] | None:
    """(format, the command that prints the log inside, the usual suffix) when `data` is a
    compressed file rather than a log: given by mistake, its bytes match nothing."""
    return next(((name, tool, suffix) for magic, name, tool, suffix in _COMPRESSED if magic.match(data)), None)


def utf8(data: bytes) -> bytes:
    """A log in UTF-16 or UTF-32 as UTF-8, line for line (a finding's line numbers are the same
    as for the log written in UTF-8), and a UTF-8 log without its byte-order mark; any other log
    as it is, uncopied. Decoded a chunk at a time: a 1 GiB log is not held as text too."""
    codec = wide_encoding(data)
    if codec is None:
        return data
    if codec == "utf-8":
        return data[len(UTF8_BOM):]
    import codecs
    import io

    decoder = codecs.getincrementaldecoder(codec)("replace")
    out, view = io.BytesIO(), memoryview(data)
    for at in range(0, len(data), _DECODE_CHUNK):
        out.write(decoder.decode(view[at:at + _DECODE_CHUNK]).encode("utf-8", "replace"))
    out.write(decoder.decode(b"", final=True).encode("utf-8", "replace"))
    return out.getvalue()


def clean(data: bytes) -> bytes:
    """The log with colour codes off and every line end a LF; same lines, same numbers.

    Whole-log work is kept to what needs it (ESC or CR present): a 100 MB log is not copied.
    A longer one is cleaned a chunk of whole lines at a time (no escape sequence spans a line
    end, nor does a CR LF): over the whole of a coloured 130 MB log, `sub` and two `replace`s
    held 950 MB.
    """
    has_esc, has_cr = b"\x1b" in data, b"\r" in data
    if not (has_esc or has_cr):
        return data
    if len(data) <= _CLEAN_CHUNK:
        return _clean(data, has_esc, has_cr)
    import io

    out, start = io.BytesIO(), 0
    while start < len(data):
        end = min(start + _CLEAN_CHUNK, len(data))
        if end < len(data):
            line_end = data.rfind(b"\n", start, end)
            if line_end < start:  # a line longer than a chunk is cleaned whole, as before
                line_end = data.find(b"\n", end)
            end = line_end + 1 if line_end >= 0 else len(data)
        out.write(_clean(data[start:end], has_esc, has_cr))
        start = end
    return out.getvalue()


_CLEAN_CHUNK = 8 << 20


def _clean(data: bytes, esc: bool, cr: bool) -> bytes:
    if esc:
        data = ANSI.sub(b"", data)
    if cr:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def clean_line(line: str) -> str:
    """One line as the tool printed it: a byte-order mark and runner prefixes off, typographic
    quotes ASCII."""
    if line[:1] == "\ufeff":  # a file saved by a Windows editor begins with one; so may a line of `cat a b`
        line = line[1:]
    if line[:1].isascii():  # every prefix starts with an ASCII character
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


def join_wrapped(first: str, second: str) -> str:
    """Two lines a wrap broke (each as `clean_line` left it), as one. The indentation both start with
    is not text of the message: a paste, a CI step or a tool indents every line it prints (a tab-
    indented R message wrapped after its blank is "\t…GLIBCXX_3.4.20' " then "\tnot found …")."""
    indent = first[:len(first) - len(first.lstrip(" \t"))]
    return first + (second[len(indent):] if indent and second.startswith(indent) else second)


def prefix_overlap(needle: bytes) -> tuple[tuple[int, ...], bool]:
    """How a needle could begin inside a runner prefix (found in the raw line, not in the text
    after the prefixes): the lengths i for which needle[:i] could end a prefix (the needle runs
    on past it), and whether it could lie wholly inside one. Supersets."""
    cuts = tuple(i for i in range(1, len(needle)) if _STRADDLE.fullmatch(needle[:i]))
    inside = (bool(_STRADDLE.fullmatch(needle)) or bool(_INSIDE.fullmatch(needle))
              or any(set(needle) <= chars for chars in _ALT_CHARS) or bool(_MIDDLE.fullmatch(needle)))
    return cuts, inside
