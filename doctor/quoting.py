"""Quoting for every place the doctor writes text that something else reads back: shells (sh,
fish, PowerShell), GitHub's line files ($GITHUB_ENV / $GITHUB_OUTPUT / $GITHUB_PATH), dotenv
files, and the `fix:` commands people paste.

Each function either returns text that its reader turns back into exactly the value given, or
raises `DoctorError` naming what the format cannot carry. Nothing is stripped silently.
The readers' rules are cited next to each function; tests/hardening checks them with the real
readers (bash, zsh, dash, fish, python-dotenv) or faithful ports (the Actions runner, docker).
"""

from __future__ import annotations

import functools
import re

from doctor.errors import DoctorError


def _shown(value: str) -> str:
    # repr keeps control bytes visible in the message instead of acting on the terminal
    return repr(value)


def refuse_nul(value: str, where: str) -> None:
    """No environment variable, argv word or C path can hold NUL."""
    if "\0" in value:
        raise DoctorError(f"{_shown(value)} contains a NUL byte, which {where} cannot carry",
                          "move or link the libtorch tree to a plain path and pass --libtorch",
                          error_id="emit.unrepresentable")


def refuse_undecodable(value: str, where: str) -> None:
    """A path that is not valid UTF-8 (Python keeps its bytes as lone surrogates) cannot be written
    into a UTF-8 text format; shells get the bytes themselves instead (see `encode_exact`)."""
    if re.search("[\ud800-\udfff]", value):
        raise DoctorError(f"{_shown(value)} is not valid UTF-8, which {where} cannot carry",
                          "rename the folder to a UTF-8 name, or use --shell sh / bash / zsh / fish",
                          error_id="emit.unrepresentable")


def encode_exact(text: str) -> bytes:
    """The bytes to write for `text`: UTF-8, with undecodable path bytes written back as they were."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:  # a surrogate that no file name decodes to
        raise DoctorError(f"{_shown(exc.object[exc.start:exc.end])} cannot be written as bytes",
                          "rename the folder to a UTF-8 name", error_id="emit.unrepresentable") from None


# -- POSIX sh, bash, zsh, dash --


def sh_quote(value: str) -> str:
    """One single-quoted word. Inside '...' POSIX shells take every byte literally (no $, `, \\ or
    newline handling), so only ' needs care: close, \\', reopen. Control bytes, ESC included, stay
    as they are; only NUL is refused (no shell word can hold it)."""
    refuse_nul(value, "a shell word")
    return "'" + value.replace("'", "'\\''") + "'"


_BARE = re.compile(r"[A-Za-z0-9_@%+,./:-][A-Za-z0-9_@%+=,./:-]*")


def sh_paste(value: str) -> str:
    """`value` for a command shown to be pasted: bare when it holds only characters no shell treats
    specially (keeps everyday fixes readable), single-quoted otherwise. A leading '=' is quoted:
    zsh expands `=cmd` to a path. Control characters (LF included) and the bytes of an undecodable
    name go in `$'\\xNN'` pieces, as GNU ls's shell-escape quoting writes them: the text shown is
    then the value's exact bytes in bash and zsh (dash before POSIX.1-2024 stops at the `$'`)."""
    if "\0" in value:
        # Only text from a log can hold NUL (no real path can): show it, the command could not use it.
        value = value.replace("\0", "\\x00")
    if _BARE.fullmatch(value):
        return value
    parts, at = [], 0
    for m in _unshowable().finditer(value):
        if m.start() > at:
            parts.append(sh_quote(value[at:m.start()]))
        parts.append("$'" + "".join(f"\\x{b:02x}" for ch in m.group() for b in _bytes_of(ch)) + "'")
        at = m.end()
    if at < len(value) or not parts:
        parts.append(sh_quote(value[at:]))
    return "".join(parts)


@functools.cache
def _unshowable() -> re.Pattern[str]:
    # What for_terminal shows as an escape (TAB it shows as it is): in plain quotes, the pasted
    # command would hold the escape's text (`\xff`), naming another path. LF too: inside quotes it
    # is exact, but a command shown on one line cannot hold it, and on two lines its second line
    # would read as a line of the report (render/text.py `labels_kept`).
    return re.compile("[" + _ACTED_ON + "\n\r]+")


def _bytes_of(ch: str) -> bytes:
    try:
        return ch.encode("utf-8", "surrogateescape")  # an undecodable name's byte, as it was
    except UnicodeEncodeError:  # a surrogate no file name decodes to (log text)
        return ch.encode("utf-8", "surrogatepass")


def sh_prepend(variable: str, elements: list[str]) -> str:
    """`export VAR="elem:…${VAR:+:$VAR}"`: a pasteable POSIX command that puts `elements` first.

    Plain paths stay inside the double quotes (readable, and nothing in them is special there);
    any other path is single-quoted ('\\'' for a quote) and joined to the double-quoted rest, so
    $(…), backticks, quotes and newlines in it stay text. A ':' inside an element would split it
    into two list entries: then the advice says to move the tree instead of a command that
    cannot work."""
    split = [e for e in elements if ":" in e]
    if split:
        return (f"move or link {sh_paste(split[0])} to a path without ':' (in {variable}, a ':' splits "
                "the path in two), then add it to " + variable)
    rest = f"${{{variable}:+:${variable}}}"
    if all(_BARE.fullmatch(e) for e in elements):
        return f'export {variable}="{":".join(elements)}{rest}"'
    return f'export {variable}={":".join(sh_paste(e) for e in elements)}"{rest}"'


# -- fish --


def fish_quote(value: str) -> str:
    """Inside fish single quotes only \\\\ and \\' are escapes; everything else, newlines and ESC
    included, is literal."""
    refuse_nul(value, "a fish word")
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- PowerShell --


def pwsh_quote(value: str) -> str:
    """Single-quoted PowerShell strings are verbatim; a ' is written ''. The typographic quotes
    U+2018/U+2019/U+201A/U+201B also close such a string, so they are doubled as well."""
    refuse_nul(value, "a PowerShell string")
    return "'" + re.sub("(['\u2018\u2019\u201a\u201b])", r"\1\1", value) + "'"


# -- lists --


def list_element(element: str, variable: str, sep: str) -> str:
    """A path that goes into a `sep`-separated list (LD_LIBRARY_PATH, CMAKE_PREFIX_PATH, PATH…).

    No quoting exists inside such a list: a separator in the path would make two entries."""
    if sep in element:
        raise DoctorError(
            f"the path {_shown(element)} contains {sep!r}, which cannot go into {variable} "
            f"(a {sep!r}-separated list: it would become two entries)",
            f"move or link the libtorch tree to a path without {sep!r} and pass --libtorch",
            error_id="emit.unrepresentable",
        )
    refuse_nul(element, variable)
    return element


# -- the rpath: words for the compiler driver (gcc, clang; rustc's link-arg and GHC's -optl pass them on) --

# ld.so replaces these in RUNPATH (dl-load.c `is_dst`: the bare name ends at a character that
# cannot continue an identifier), and reads RUNPATH as a ':'-list; it has no escape for either.
_LOADER_DST = re.compile(r"\$(?:(?:ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_])|\{(?:ORIGIN|LIB|PLATFORM)\})")


def rpath_problem(lib_dir: str, system: str = "Linux") -> tuple[str, str] | None:
    """(what, why) when the loader of `system` would not read `lib_dir` back from an rpath, else
    None. A Mach-O LC_RPATH is one path, taken as it is: nothing to refuse on macOS."""
    if system == "Darwin":
        return None
    if ":" in lib_dir:
        return "':'", "the loader splits RUNPATH at ':'"
    if token := loader_token(lib_dir):
        return repr(token), f"the loader replaces {token} in RUNPATH"
    return None


def loader_token(path: str) -> str | None:
    """The dynamic string token ($ORIGIN, $LIB, $PLATFORM, or braced) in `path`, if any: glibc's
    ld.so replaces it in RUNPATH and in LD_LIBRARY_PATH alike (ld.so(8), "Dynamic string tokens")."""
    m = _LOADER_DST.search(path)
    return m.group() if m else None


def rpath_words(lib_dir: str, system: str = "Linux") -> list[str]:
    """The compiler-driver words that give a program the rpath `lib_dir`, each carried whole.

    `-Wl,-rpath,DIR` when DIR holds no comma (the form people know); else `-Xlinker -rpath
    -Xlinker DIR`: the driver splits a -Wl argument at every comma, so `/a,b/lib` reached ld as
    `-rpath /a` and an input file `b/lib` ("ld: cannot find b/lib"), while -Xlinker passes one
    word as it is. A path no RUNPATH can hold (`rpath_problem`) is refused."""
    problem = rpath_problem(lib_dir, system)
    if problem:
        raise DoctorError(f"the path {_shown(lib_dir)} contains {problem[0]}, which an rpath cannot carry ({problem[1]})",
                          f"move or link the libtorch tree to a path without {problem[0]} and pass --libtorch",
                          error_id="emit.unrepresentable")
    refuse_nul(lib_dir, "a linker argument")
    if "," in lib_dir:
        return ["-Xlinker", "-rpath", "-Xlinker", lib_dir]
    return [f"-Wl,-rpath,{lib_dir}"]


# -- GitHub Actions: $GITHUB_ENV and $GITHUB_OUTPUT --


def github_env_block(name: str, value: str, system: str = "Linux") -> str:
    """`NAME<<DELIM\\nvalue\\nDELIM\\n`, the runner's multi-line syntax, for any value.

    The runner (actions/runner, FileCommandManager.cs, SetEnvFileCommand) takes the value as the
    exact text between the header line and the next line equal to DELIM, so the only thing to
    check is that DELIM is not a line of the value; the delimiter is random, as @actions/core's
    `ghadelimiter_<uuid>`, and checked anyway. Windows runners also end lines at \\r\\n, so a \\r
    there is refused."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
        raise DoctorError(f"{_shown(name)} is not a variable name GitHub accepts", "report this as a doctor bug",
                          error_id="emit.unrepresentable")
    refuse_nul(value, "$GITHUB_ENV")
    refuse_undecodable(value, "$GITHUB_ENV")
    if system == "Windows" and "\r" in value:
        raise DoctorError(f"{_shown(value)} contains a carriage return, which a Windows runner's $GITHUB_ENV "
                          "cannot carry", "remove it from the environment before this step", error_id="emit.unrepresentable")
    import secrets  # here, not at the top: it loads libcrypto, which ld.so looks for along LD_LIBRARY_PATH

    for _ in range(8):
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        if delimiter not in value:
            return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
    raise DoctorError(f"no delimiter found that is absent from {_shown(value)}", "report this as a doctor bug",
                      error_id="emit.unrepresentable")


def github_path_line(path: str) -> str:
    """One line for $GITHUB_PATH, which the runner reads with File.ReadAllLines (lines end at \\r,
    \\n or \\r\\n; empty lines are skipped): a path with either, or an empty one, cannot be written."""
    if not path or "\n" in path or "\r" in path:
        raise DoctorError(f"the path {_shown(path)} cannot be written to $GITHUB_PATH (one path per line)",
                          "move or link the libtorch tree to a path without line breaks", error_id="emit.unrepresentable")
    refuse_nul(path, "$GITHUB_PATH")
    refuse_undecodable(path, "$GITHUB_PATH")
    return path + "\n"


# -- dotenv: one file exact under python-dotenv and docker --env-file --

# docker reads the file with Go's bufio.Scanner: a line over 64 KiB is an error.
_DOCKER_MAX_LINE = 64 * 1024 - 1


def dotenv_line(name: str, value: str) -> str:
    """`NAME=value`, unquoted, read back exactly by both python-dotenv and `docker --env-file`.

    docker does no quoting at all (https://docs.docker.com/reference/cli/docker/container/run/#env:
    the value runs to the end of the line, quotes included; only the line's leading whitespace
    is trimmed; a line ends at \\n with one trailing \\r dropped; invalid UTF-8 is an error), so
    a quoted value would reach docker with its quotes. An unquoted value is taken as written by
    python-dotenv (parser.py `parse_unquoted_value`) except that it strips leading and trailing
    whitespace and everything from a whitespace+'#' on, treats a leading quote as quoting, and
    expands `${…}` (main.py `resolve_variables`, with the default interpolate=True). What either
    reader would change is refused, never altered."""
    reason = None
    if "\n" in value or "\r" in value or "\0" in value:
        reason = "a line break or NUL (a dotenv value is one line)"
    elif re.search("[\ud800-\udfff]", value):
        reason = "bytes that are not UTF-8"
    elif value != value.strip():
        reason = "leading or trailing whitespace (python-dotenv strips it)"
    elif value[:1] in ("'", '"'):
        reason = "a leading quote (python-dotenv reads it as quoting; docker keeps it)"
    elif re.search(r"\s#", value):
        reason = "whitespace followed by '#' (python-dotenv reads a comment there)"
    elif "${" in value:
        reason = "'${' (python-dotenv expands ${…}; docker does not)"
    elif len((name + "=" + value).encode("utf-8")) > _DOCKER_MAX_LINE:
        reason = "more than 64 KiB on one line (docker's limit)"
    if reason:
        raise DoctorError(
            f"dotenv cannot carry {name}={_shown(value)}: it contains {reason}",
            "use --shell sh/bash/zsh/fish (quoted exactly), or clean that path or variable first",
            error_id="emit.unrepresentable",
        )
    return f"{name}={value}"


def cmd_quote(value: str) -> str:
    """A Windows path for a cmd.exe line typed at the prompt: in double quotes, where & ^ | < >
    and spaces are literal. Windows paths cannot hold a double quote; % stays special in cmd
    even inside quotes, so a value holding one is refused rather than pasted wrongly."""
    refuse_nul(value, "a cmd.exe value")
    if '"' in value or "%" in value or "\n" in value or "\r" in value:
        from doctor.errors import UsageError

        raise UsageError(f"{_shown(value)} cannot be written for cmd.exe exactly", "use PowerShell ($env:) for this path")
    return f'"{value}"'


def for_terminal(text: str, one_line: bool = False, *, keep_cr: bool = False) -> str:
    """`text` for a person to read, on a terminal (the text report, messages, errors) or on a page
    a CI system or a code host renders from the doctor's output (GitHub annotations, JUnit, the
    markdown report): every control character but TAB and LF shown as its escape (\\x1b, \\r,
    \\x9b), and each bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069: "Trojan
    Source", text that shows in another order than it reads) as \\u202e, and each byte of an
    undecodable name as \\xNN. With `one_line`, LF too: a value inside a one-line field (a title, a
    path) cannot start a line of its own that looks like the report's. With `keep_cr`, CR stays,
    for a format that carries line ends exactly in its own escapes (a workflow command's %0D)."""
    if text.isprintable():  # most text: nothing to show otherwise
        return text
    return _terminal_unsafe(one_line, keep_cr).sub(_escape, text)


SHOWN_MOST = 600  # characters of one evidence excerpt or area detail a person is shown


def elided(text: str, most: int = SHOWN_MOST) -> str:
    """`text` for a person to read, about `most` characters at most: a longer value (a 2,000-entry
    LD_LIBRARY_PATH is 38 KB, and the evidence of three findings may quote it) keeps its start and
    its end around the count of what was left out. JSON keeps every value whole."""
    if len(text) <= most:
        return text
    head, tail = most * 2 // 3, most // 3
    return f"{text[:head]} … ({len(text) - head - tail:,} characters left out) … {text[-tail:]}"


def valid_unicode(text: str) -> str:
    """`text` as a file others parse can hold it (JSON, JUnit XML, markdown, workflow commands):
    each byte of an undecodable name as \\xNN, as for_terminal shows it. Python holds such a byte
    as a lone surrogate: json.dumps writes it as "\\udcff", an escape RFC 8259 leaves undefined
    (serde_json and `doctor diff` refuse it), and the other formats got the raw byte, which is
    not UTF-8 (expat refuses the whole JUnit file)."""
    return _lone_surrogate().sub(_escape, text)


@functools.cache
def _lone_surrogate() -> re.Pattern[str]:
    return re.compile("[\ud800-\udfff]")


# What a reader acts on instead of showing, but for TAB, LF and CR: C0 controls (ESC begins colour,
# title and OSC 52 clipboard sequences; BS, BEL), DEL, C1 (U+009B is CSI to a terminal in 8-bit
# mode), the bidirectional overrides and isolates (a browser or terminal shows the text after them
# reordered: CVE-2021-42574), and the lone surrogates that stand for the bytes of an undecodable
# path (surrogateescape), which a UTF-8 stream cannot carry. The one list: for_terminal and
# sh_paste read it, and through for_terminal every renderer but JSON, which keeps values exact.
_ACTED_ON = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"


@functools.cache
def _terminal_unsafe(one_line: bool, keep_cr: bool = False) -> re.Pattern[str]:
    # CR too, unless kept: it returns to the line start, so what follows overwrites what was shown.
    # Compiled on first use: most runs print no text report.
    return re.compile("[" + _ACTED_ON + ("\n" if one_line else "") + ("" if keep_cr else "\r") + "]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return repr(m.group())[1:-1]
