"""`doctor explain [LOG|-]` and `doctor explain --from-command -- CMD ARGS…`."""

from __future__ import annotations

import sys

import click

from doctor.commands._output import Seconds, print_report, report_options
from doctor.commands._say import say

READ_LIMIT = 1 << 30  # a log bigger than 1 GiB is read up to here
MAX_TIMEOUT = 7 * 24 * 3600  # a week: longer than any build, and within what the clock and waits take


class _Command(click.Command):
    """explain keeps unknown options as arguments, for `--from-command -- CMD ARGS`; it counts the
    words after `--` here, so that any other word starting with `-` can be refused as an option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["explain.verbatim"] = len(args) - args.index("--") - 1 if "--" in args else 0
        return super().parse_args(ctx, args)


@click.command("explain", cls=_Command, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[LOG|-]")
@click.option("--from-command", "from_command", is_flag=True,
              help="Run the command given after `--` as `tee` would (it reads this stdin; its stdout and stderr "
              "pass through byte for byte as they come, both to stderr under --json), and explain what it printed "
              "if it fails (its first 1 GiB). A command that succeeds passes its exit code through.")
@click.option("--timeout", type=Seconds(1, MAX_TIMEOUT), default=3600, show_default=True,
              metavar="SECONDS", help=f"Seconds --from-command lets the command run (1 to {MAX_TIMEOUT}, a week); then it is killed "
              "and the doctor exits 124.")
@click.option("--no-facts", is_flag=True,
              help="Explain from the log alone, without looking at this machine's libtorch.")
@report_options
def command(args: tuple[str, ...], from_command: bool, timeout: float, no_facts: bool, fmt: str | None,
            as_json: bool, verbose: int, color: str, strict: bool) -> int:
    """Read a failing build or run log and name each known setup problem: the lines that prove it,
    the cause, and the fix for this machine (libtorch's ABI flag, the dirs to add, the variant to fetch).

    \b
      doctor explain build.log
      make 2>&1 | doctor explain -
      doctor explain <(make 2>&1)
      doctor explain --from-command -- cargo build

    A log whose name starts with - is given as ./-name (or after --).

    Exit codes: 0 no known setup problem found; 1 problems found (or the log cannot be read);
    2 usage error. With --from-command a command that succeeds passes its own exit code
    through, and a failure with no known cause (a command.failed warning) keeps the command's
    exit code, also under --strict (124 on timeout, 128+N when killed by signal N).
    """
    from doctor.host import Host

    _refuse_unknown_option(click.get_current_context(), args, from_command)
    host = Host.from_system()
    if from_command:
        return _from_command(host, args, timeout, no_facts, fmt, as_json, verbose, color, strict)
    if len(args) > 1:
        raise click.UsageError(
            f"explain reads one log, got {len(args)} arguments; to run a command use: doctor explain --from-command -- CMD ARGS"
        )
    name = args[0] if args else "-"
    if name == "-":
        if getattr(sys.stdin, "closed_by_caller", False):  # cli._fit_streams: `doctor explain - <&-`
            from doctor.errors import DoctorError

            raise DoctorError("standard input is closed: there is no log to read",
                              hint="give a LOG file, or pipe the log in: make 2>&1 | doctor explain -",
                              error_id="explain.no-such-log")
        stream = click.get_binary_stream("stdin")
        if not args and stream.isatty():
            raise click.UsageError("give a LOG file, - to read standard input, or --from-command -- CMD ARGS")
        # Bytes, not text: a log in any encoding (or with binary junk) is read, never decoded whole.
        text, source = _read_stdin(stream), "stdin"
    else:
        text, source = _read(host, name), name
    _refuse_compressed(text, name)
    report = _report(host, text, source, no_facts, strict)
    return print_report(report, fmt, as_json, verbose, color)


def _refuse_unknown_option(ctx: click.Context, args: tuple[str, ...], from_command: bool) -> None:
    """A word before `--` that starts with `-` (not `-` itself) and no option knows is a mistyped
    option, not a log file named `--jsno`; with --from-command, up to the command's first word."""
    from doctor.errors import UsageError
    from doctor.quoting import sh_paste

    for word in args[: len(args) - ctx.meta.get("explain.verbatim", 0)]:
        if word.startswith("-") and word != "-":
            import difflib

            known = [o for p in ctx.command.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
            near = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
            raise UsageError(f"no such option: {word}" + (f" (did you mean {near[0]}?)" if near else ""),
                             f"see `doctor explain --help`; a log file whose name starts with - is given as "
                             f"{sh_paste('./' + word)}", error_id="usage.bad-option")
        if from_command:
            return


def _refuse_compressed(data: bytes, name: str) -> None:
    """A compressed log (build.log.gz from a CI artifact) matches nothing: it would be 'no known
    setup problem'. Say so, and how to read it."""
    from doctor.errors import DoctorError
    from doctor.explain.normalise import compressed
    from doctor.quoting import sh_paste

    found = compressed(data)
    if found is None:
        return
    kind, tool, suffix = found
    what, given = ("standard input", f"build.log{suffix}") if name == "-" else (name, sh_paste(name))
    raise DoctorError(f"{what} is compressed ({kind}), not a log",
                      hint=f"decompress it first: {tool} {given} | doctor explain -", error_id="explain.not-a-log")


def _read_stdin(stream) -> bytes:
    """Standard input to its end (at most READ_LIMIT bytes), through its file descriptor: the
    stream's read(READ_LIMIT) asks for 1 GiB before reading a byte."""
    import io

    from doctor.host import read_fd

    try:
        fd = stream.fileno()
    except (AttributeError, io.UnsupportedOperation):  # an in-memory stdin (a test runner's)
        return stream.read(READ_LIMIT)
    return read_fd(fd, READ_LIMIT)


def _read(host, path: str) -> bytes:
    from doctor.errors import DoctorError

    give = "give the path to a build or run log, or - to read standard input"
    if not path:  # the current folder to the file system, "is a directory" to the user
        raise DoctorError("the log's name is empty", hint=give, error_id="explain.no-such-log")
    if host.is_dir(path):
        raise DoctorError(f"{path} is a directory, not a log file", hint="give the path to a build or run log", error_id="explain.not-a-log")
    text = host.read_bytes(path, limit=READ_LIMIT, pipe=True)
    if text is None:
        from doctor.diagnose.common import NOT_A_DIRECTORY

        kind = host.path_kind(path)
        if kind in ("missing", "directory"):  # a directory: removed and made again meanwhile
            raise DoctorError(f"{path}: no such file", hint=give, error_id="explain.no-such-log")
        if kind in ("dangling", "loop", "too-long", "under-file"):
            raise DoctorError(f"{path} {NOT_A_DIRECTORY[kind]}", hint=give, error_id="explain.no-such-log")
        if kind == "denied":
            raise DoctorError(f"{path} {NOT_A_DIRECTORY[kind]}",
                              hint="a folder on its path is closed to this user: check its permissions",
                              error_id="explain.unreadable-log")
        if kind in ("device", "socket"):  # a FIFO was read above
            raise DoctorError(f"{path} is a device or a socket, not a log file",
                              hint="give the path to a build or run log, or pipe it: make 2>&1 | doctor explain -",
                              error_id="explain.not-a-log")
        raise DoctorError(f"{path}: cannot be read", hint="check its permissions", error_id="explain.unreadable-log")
    return text


def _from_command(host, argv: tuple[str, ...], timeout: float, no_facts: bool, fmt, as_json, verbose, color, strict) -> int:
    from doctor.commands._output import choose_format
    from doctor.errors import DoctorError

    if not argv:
        raise click.UsageError("--from-command needs a command after --, e.g. doctor explain --from-command -- make -j4")
    # As `tee` would: the command's bytes reach the terminal as they come. Where stdout carries one
    # document (the JSON envelope, a JUnit or markdown report) both of its streams go to stderr.
    document = choose_format(fmt, as_json) in ("json", "junit", "markdown")
    err = click.get_binary_stream("stderr")
    out = err if document else click.get_binary_stream("stdout")
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # anything the doctor wrote comes before the command's bytes
    result = host.relay(argv, timeout, out, err, keep=READ_LIMIT)
    if result.returncode is None and not result.timed_out:
        raise DoctorError(result.error or f"{argv[0]}: could not be started", hint="check the command name and PATH", error_id="explain.command-not-started")
    command = _shell_words(argv)
    if result.returncode == 0:
        # Success: stay out of the way, but for a document asked for.
        return print_report(_succeeded(argv, command), fmt, as_json, verbose, color) if document else 0
    if result.timed_out:
        say(f"doctor: {result.error}")
    shown = command if len(command) <= 60 else command[:59] + "…"
    signum = -result.returncode if result.returncode is not None and result.returncode < 0 else None
    if result.timed_out:
        how = "timed out"
    elif signum is not None:
        how = f"killed by signal {signum}{_signal_name(signum)}"
    else:
        how = f"exit {result.returncode}"
    report = _report(host, result.output, f"output of `{shown}`", no_facts, strict, failed=f"the command failed ({how})",
                     cut=_cut(len(result.output), result.dropped, result.spool_error), command=command)
    report.facts["command"] = {"argv": list(argv), "returncode": result.returncode, "timed_out": result.timed_out,
                               "signal": signum, "output_read": len(result.output), "output_unread": result.dropped}
    # A shell reports death by signal N as 128+N; Popen's -N would reach exit() as 256-N.
    report.passthrough_exit = 124 if result.timed_out else 128 + signum if signum is not None else result.returncode
    return print_report(report, fmt, as_json, verbose, color)


def _shell_words(argv: tuple[str, ...]) -> str:
    """The command line as a shell would take it back: `sh -c 'echo hi; kill -9 $$'`, where a
    plain join showed `sh -c echo hi; kill -9 $$`, three commands."""
    from doctor.quoting import sh_paste

    return " ".join(sh_paste(word) for word in argv)


def _cut(read: int, unread: int, why: str) -> str:
    """What the report says when the analysis saw only the start of a command's output."""
    if not unread:
        return ""
    from doctor.formats import human_bytes

    because = f"as the temporary file could take no more ({why})" if why else "the limit for a log"
    return f"only its first {human_bytes(read)} were read, {because}; {human_bytes(unread)} more were passed on unread"


def _succeeded(argv: tuple[str, ...], command: str):
    """The report of a command that succeeded: nothing to explain."""
    from doctor import __version__
    from doctor.model import Area, Report

    shown = command if len(command) <= 60 else command[:59] + "…"
    area = Area("explain", f"output of `{shown}`", "the command succeeded; nothing to explain")
    return Report("explain", {"log": f"output of `{shown}`", "lines": 0, "libtorch": None,
                              "command": {"argv": list(argv), "returncode": 0, "timed_out": False}},
                  [area], doctor_version=__version__)


def _unknown_failure(command: str, failed: str, lines: int):
    from doctor.fixes import first_error
    from doctor.model import Evidence, Finding, Level

    return Finding("command.failed", Level.WARNING, f"{failed}, and its output shows no known setup cause",
                   detail=(f"none of the {lines} line{'s' * (lines != 1)} it printed holds an error `doctor explain` knows"
                           if lines else "it printed nothing"),
                   fix=first_error(command), area="explain", evidence=[Evidence("command", command, failed)])


def _signal_name(signum: int) -> str:
    import signal

    try:
        return f" ({signal.Signals(signum).name})"
    except ValueError:
        return ""


def _report(host, text: str | bytes, source: str, no_facts: bool, strict: bool, failed: str = "", cut: str = "",
            command: str = ""):
    from doctor import __version__
    from doctor.explain.engine import normalise
    from doctor.explain_machine import detect, explain_on
    from doctor.model import Area, Report

    facts = None if no_facts else detect(host)
    data = normalise(text)  # CR-only line ends count as lines here as in the findings
    findings = explain_on(host, data, facts, source=source)
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    summary = (f"{len(findings)} known setup problem{'s' * (len(findings) != 1)} found" if findings
               else "no known setup problem found")
    if failed:
        summary = f"{failed}; {summary}"
        if not findings:  # a failed command is no pass: its own exit code still ends the run
            summary = f"{failed}; no known setup cause found"
            findings = [_unknown_failure(command, failed, lines)]
    if cut:
        summary = f"{summary}; {cut}"
    details = [f"{lines} line{'s' * (lines != 1)} read from {source}"]
    install = facts.install if facts is not None else None
    libtorch = None
    if install is not None:
        libtorch = {"root": str(install.root), "version": install.version, "variant": install.variant,
                    "abi": install.abi, "lib_dir": str(install.lib_dir)}
        details.append(f"active libtorch: {install.label} at {install.root} (ABI: {install.abi or 'unknown'})")
    elif not no_facts:
        details.append("no libtorch found on this machine: fixes are given without its paths")
    area = Area("explain", source, summary, details, findings)
    return Report("explain", {"log": source, "lines": lines, "libtorch": libtorch}, [area],
                  doctor_version=__version__, strict=strict)
