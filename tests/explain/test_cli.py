"""`doctor explain` as a user runs it: files, stdin, --from-command, --json, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from testsupport.support import REPO, doctor_subprocess

from doctor.cli import main

LOGS = Path(__file__).resolve().parents[2] / "tests/fixtures/logs"
ABI_LOG = LOGS / "abi.mismatch--local-gxx-abi0.log"
CLEAN_LOG = LOGS / "none--typeerror-deep3d-3.log"


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str


def invoke(*args: str, input: str | None = None) -> Ran:
    """doctor.cli.main in click's isolation: the real exit-code mapping, output captured."""
    with CliRunner().isolation(input=input) as (out, err, _):
        code = main(["explain", *args])
    return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def test_a_log_with_a_problem_exits_1_and_names_id_lines_cause_and_fix():
    result = invoke(str(ABI_LOG))
    assert result.exit_code == 1
    out = result.stdout
    assert "[abi.mismatch]" in out
    assert "line 3: p.cpp:(.text+0x3e): undefined reference to `c10::Device::Device(std::string const&)'" in out
    assert "fix: compile with -D_GLIBCXX_USE_CXX11_ABI=1" in out
    assert "Your command line has -D_GLIBCXX_USE_CXX11_ABI=0." in out


def test_a_log_without_a_setup_problem_says_so_and_exits_0():
    result = invoke(str(CLEAN_LOG))
    assert result.exit_code == 0
    assert "no known setup problem found" in result.stdout


def test_stdin_with_dash_and_json():
    result = invoke("-", "--json", input=(LOGS / "cuda.no-device--pytorch-67991.log").read_text())
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["command"] == "explain" and report["exit_code"] == 1
    assert [f["id"] for f in report["findings"]] == ["cuda.no-device"]
    assert report["facts"]["log"] == "stdin"
    assert any(e["source"].startswith("stdin:") for e in report["findings"][0]["evidence"])


def test_no_argument_reads_piped_stdin():
    result = invoke(input="./a: error while loading shared libraries: libc10.so: cannot open shared object file: x\n")
    assert result.exit_code == 1 and "[loader.library-not-found]" in result.stdout


def test_no_facts_gives_generic_fixes_without_this_machines_paths():
    result = invoke(str(ABI_LOG), "--no-facts", "--json")
    report = json.loads(result.stdout)
    assert report["facts"]["libtorch"] is None
    assert "active libtorch" not in json.dumps(report["findings"])


def test_usage_and_input_errors():
    two = invoke("a.log", "b.log")
    assert two.exit_code == 2 and "explain reads one log" in two.stderr
    missing = invoke("/nonexistent/build.log")
    assert missing.exit_code == 1 and "/nonexistent/build.log: no such file" in missing.stderr
    no_cmd = invoke("--from-command")
    assert no_cmd.exit_code == 2 and "--from-command needs a command" in no_cmd.stderr


@pytest.mark.parametrize("args", [["--bogus"], ["--jsno", "a.log"], ["-x"], ["--from-command", "--bogus", "--", "true"]])
def test_an_unknown_option_is_a_usage_error_not_a_log_name(args):
    # kept as arguments for `--from-command -- CMD ARGS`, they were read as files: "--bogus: no such file"
    result = invoke(*args)
    word = args[1] if args[0] == "--from-command" else args[0]
    assert result.exit_code == 2, result.stderr
    error, hint = result.stderr.splitlines()
    assert error.startswith(f"error: no such option: {word}")
    assert hint == f"hint: see `doctor explain --help`; a log file whose name starts with - is given as ./{word}"


def test_a_mistyped_option_gets_the_option_it_resembles():
    result = invoke("--jsno", "a.log")
    assert result.stderr.splitlines()[0] == "error: no such option: --jsno (did you mean --json?)"


def test_a_log_named_like_an_option_is_read_after_dashdash_or_as_dot_slash(tmp_path, monkeypatch):
    (tmp_path / "-x.log").write_bytes(ABI_LOG.read_bytes())
    monkeypatch.chdir(tmp_path)
    for args in (["--", "-x.log"], ["./-x.log"]):
        result = invoke("--no-facts", *args)
        assert result.exit_code == 1 and "[abi.mismatch]" in result.stdout, (args, result.stderr)


def test_exit_codes_as_a_user_sees_them(tmp_path):
    assert doctor_subprocess("explain", str(ABI_LOG)).returncode == 1
    assert doctor_subprocess("explain", str(CLEAN_LOG)).returncode == 0
    missing = doctor_subprocess("explain", str(tmp_path / "nope.log"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    directory = doctor_subprocess("explain", str(tmp_path))
    assert directory.returncode == 1 and "is a directory" in directory.stderr


def _kinds(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a.log").write_text("x\n")
    (tmp_path / "dangling.log").symlink_to(tmp_path / "removed.log")
    (tmp_path / "loop.log").symlink_to(tmp_path / "loop.log")
    return {"dangling": tmp_path / "dangling.log", "loop": tmp_path / "loop.log", "under-file": tmp_path / "a.log/x",
            "too-long": tmp_path / ("a" * 300)}


@pytest.mark.parametrize("kind, says", [
    ("dangling", "is a symbolic link to a path that does not exist"),
    ("loop", "is a symbolic link loop"),
    ("under-file", "does not exist (a file stands where one of its parent folders should be)"),
    ("too-long", "is too long a path for this system"),
])
def test_a_log_path_that_names_no_file_says_why(tmp_path, kind, says):
    # each was "no such file"
    path = _kinds(tmp_path)[kind]
    result = invoke("--no-facts", str(path))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {path} {says}",
                                          "hint: give the path to a build or run log, or - to read standard input"]


def test_an_empty_log_name_is_not_the_current_folder():
    # "error:  is a directory, not a log file"
    result = invoke("--no-facts", "")
    assert result.exit_code == 1 and result.stderr.splitlines()[0] == "error: the log's name is empty"


# How Windows tools write a log: PowerShell 5.1's `>` (UTF-16LE with a mark, CR LF), Out-File
# -Encoding BigEndianUnicode / UTF32 / UTF8 (with a mark), and wide text without one.
WIDE = {
    "utf-16le-bom-crlf": lambda t: t.replace("\n", "\r\n").encode("utf-16"),
    "utf-16le": lambda t: t.encode("utf-16-le"),
    "utf-16be-bom": lambda t: b"\xfe\xff" + t.encode("utf-16-be"),
    "utf-16be": lambda t: t.encode("utf-16-be"),
    "utf-32le-bom": lambda t: t.encode("utf-32"),
    "utf-32be": lambda t: t.encode("utf-32-be"),
    "utf-8-bom": lambda t: t.encode("utf-8-sig"),
}


@pytest.mark.parametrize("log", ["abi.mismatch--local-gxx-abi0.log", "windows.vc-runtime-missing--meshlab-610.log",
                                 "link.library-missing--local-gxx-no-libdir.log"])
@pytest.mark.parametrize("encoding", sorted(WIDE))
def test_a_log_in_a_wide_encoding_is_explained_as_in_utf8(tmp_path, log, encoding):
    # read as bytes, such a log was "no known setup problem", exit 0
    plain = invoke("--no-facts", "--json", str(LOGS / log))
    (tmp_path / log).write_bytes(WIDE[encoding]((LOGS / log).read_text(encoding="utf-8")))
    wide = invoke("--no-facts", "--json", str(tmp_path / log))
    assert plain.exit_code == wide.exit_code == 1
    expected = json.loads(plain.stdout.replace(str(LOGS / log), "LOG"))
    got = json.loads(wide.stdout.replace(str(tmp_path / log), "LOG"))
    assert got["findings"] and got["findings"] == expected["findings"]
    assert got["facts"]["lines"] == expected["facts"]["lines"]


def _compress(kind: str, data: bytes) -> bytes:
    import bz2
    import gzip
    import io
    import lzma
    import shutil
    import subprocess
    import zipfile

    if kind == "zstd":
        if shutil.which("zstd") is None:
            pytest.skip("no zstd here")
        return subprocess.run(["zstd", "-c"], input=data, capture_output=True, check=True).stdout
    if kind == "zip":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("build.log", data)
        return buffer.getvalue()
    return {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress}[kind](data)


COMPRESSED = {"gzip": ("zcat", ".gz"), "xz": ("xzcat", ".xz"), "bzip2": ("bzcat", ".bz2"), "zstd": ("zstdcat", ".zst"),
              "zip": ("unzip -p", ".zip")}


@pytest.mark.parametrize("kind", sorted(COMPRESSED))
@pytest.mark.parametrize("empty", [False, True])
def test_a_compressed_log_is_refused_with_how_to_read_it(tmp_path, kind, empty):
    # its bytes matched nothing: "no known setup problem", exit 0
    tool, suffix = COMPRESSED[kind]
    path = tmp_path / f"build.log{suffix}"
    path.write_bytes(_compress(kind, b"" if empty else ABI_LOG.read_bytes()))
    given = invoke("--no-facts", str(path))
    assert given.exit_code == 1 and given.stdout == ""
    assert given.stderr.splitlines() == [f"error: {path} is compressed ({kind}), not a log",
                                         f"hint: decompress it first: {tool} {path} | doctor explain -"]
    with CliRunner().isolation(input=path.read_bytes()) as (out, err, _):
        code = main(["explain", "--no-facts", "-"])
    assert code == 1 and err.getvalue().decode().splitlines() == [
        f"error: standard input is compressed ({kind}), not a log",
        f"hint: decompress it first: {tool} build.log{suffix} | doctor explain -"]


def test_a_log_that_starts_like_bzip2_is_a_log():
    result = invoke("--no-facts", "-", input="BZh9 " + ABI_LOG.read_text())
    assert result.exit_code == 1 and "[abi.mismatch]" in result.stdout


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_from_command_success_passes_output_and_exit_code_through():
    result = invoke("--from-command", "--", *python("print('built fine')"))
    assert result.exit_code == 0
    assert result.stdout == "built fine\n"


def test_from_command_failure_is_explained_and_its_output_kept():
    text = (LOGS / "link.library-missing--local-gxx-no-libdir.log").read_text()
    code = f"import sys; sys.stderr.write({text!r}); sys.exit(1)"
    result = invoke("--from-command", "--json", "--", *python(code))
    assert result.exit_code == 1
    assert "cannot find -lc10" in result.stderr  # the command's own output, on stderr
    report = json.loads(result.stdout)
    assert [f["id"] for f in report["findings"]] == ["link.library-missing"]
    assert report["command"] == "explain" and report["facts"]["command"]["returncode"] == 1


def test_from_command_unknown_failure_keeps_the_commands_exit_code():
    result = invoke("--from-command", "--", *python("import sys; print('segfault-ish'); sys.exit(3)"))
    assert result.exit_code == 3
    assert "the command failed (exit 3); no known setup cause found" in result.stdout


@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_a_failed_command_with_no_known_cause_is_a_warning_not_a_pass(strict):
    # it was `[✓] … the command failed (exit 2) …` and "No problems found."
    result = invoke("--no-facts", *strict, "--from-command", "--", "sh", "-c", "echo compiling; exit 2")
    assert result.exit_code == 2  # the command's own code, under --strict too
    lines = result.stdout.splitlines()
    assert lines[0] == "compiling"
    assert lines[1] == "[!] output of `sh -c 'echo compiling; exit 2'`: the command failed (exit 2); no known setup cause found"
    assert lines[2] == "    ! the command failed (exit 2), and its output shows no known setup cause [command.failed]"
    assert "No problems found." not in result.stdout and "0 errors, 1 warning" in result.stdout
    report = json.loads(invoke("--no-facts", "--json", *strict, "--from-command", "--", "sh", "-c", "exit 2").stdout)
    assert (report["exit_code"], report["ok"]) == (2, False)
    assert [(f["id"], f["level"]) for f in report["findings"]] == [("command.failed", "warning")]


def test_the_command_line_is_shown_as_a_shell_would_take_it_back():
    # a plain join showed `sh -c echo hi; kill -9 $$`: three commands, not one
    result = invoke("--no-facts", "--from-command", "--", "sh", "-c", "echo hi; kill -9 $$")
    assert result.exit_code == 137
    assert "[!] output of `sh -c 'echo hi; kill -9 $$'`: the command failed (killed by signal 9 (SIGKILL))" in result.stdout
    assert "fix: read the first error in the output of sh -c 'echo hi; kill -9 $$' (above)" in result.stdout


def test_from_command_timeout_exits_124():
    result = invoke("--from-command", "--timeout", "1", "--", *python("import time; time.sleep(30)"))
    assert result.exit_code == 124
    assert "timed out" in result.stdout


@pytest.mark.parametrize("seconds", ["1e10", "inf", "-inf", "nan", "0.5"])
def test_a_timeout_that_is_no_time_span_is_a_usage_error(seconds):
    # 1e10 and inf overflowed the clock (a traceback, exit 3); nan was taken ("timed out after nan s")
    result = invoke("--from-command", "--timeout", seconds, "--", *python("pass"))
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("error: Invalid value for '--timeout'") and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[1].startswith("hint: ")


def test_the_longest_timeout_is_taken():
    result = invoke("--from-command", "--timeout", "604800", "--", *python("print('ok')"))
    assert result.exit_code == 0 and result.stdout == "ok\n"


def test_from_command_missing_program():
    result = doctor_subprocess("explain", "--from-command", "--", "no-such-program-xyz")
    assert result.returncode == 1 and "not found" in result.stderr


def doctor_bytes(*args: str, input: bytes | None = None, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """`python -m doctor explain ...` in a subprocess, its output as bytes."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR", "GITHUB_"))}
    full["PYTHONPATH"] = str(REPO)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "doctor", "explain", *args], input=input, capture_output=True,
                          env=full, cwd=os.environ["HOME"], timeout=120, **kw)


LOADER_LINE = "./app: error while loading shared libraries: libc10.so: cannot open shared object file: No such file or directory"


def test_from_command_passes_a_big_output_through_byte_for_byte(tmp_path):
    # over 1 MiB it was cut ("[... N bytes dropped by torch-doctor ...]"), CR became LF, \xff became U+FFFD
    big = tmp_path / "big.bin"
    big.write_bytes(b"".join(b"%d\r\n\xff\x00 \x1b[1mbold\x1b[0m\n" % i for i in range(150_000)))
    result = doctor_bytes("--from-command", "--", "cat", str(big))
    assert result.returncode == 0 and result.stdout == big.read_bytes() and result.stderr == b""


def test_from_command_passes_stdin_to_the_command():
    # stdin was /dev/null: `echo hi | doctor explain --from-command -- cat` printed nothing
    result = doctor_bytes("--from-command", "--", "cat", input=b"hi\n")
    assert result.returncode == 0 and result.stdout == b"hi\n"


def test_from_command_finds_a_cause_in_the_middle_of_a_long_build():
    # Host.run kept 512 KiB of the head and of the tail of each stream: the line between was gone
    # 20,000 lines (over 1 MiB), the cause, 20,000 lines
    line = "[{i}/40000] building CXX object src/CMakeFiles/app.dir/module_{i}.cpp.o\\n"
    code = (f"import sys; w = sys.stdout.write; [w(f'{line}') for i in range(20000)]; "
            f"w({LOADER_LINE!r} + '\\n'); [w(f'{line}') for i in range(20000, 40000)]; "
            f"sys.stderr.write('make: *** [all] Error 2\\n'); sys.exit(2)")
    result = doctor_bytes("--no-facts", "--json", "--from-command", "--", sys.executable, "-c", code)
    report = json.loads(result.stdout)
    assert result.returncode == 1 and [f["id"] for f in report["findings"]] == ["loader.library-not-found"]
    assert report["findings"][0]["evidence"][0]["source"].endswith(":20001")
    assert report["facts"]["lines"] == 40002
    # under --json the command's bytes go to stderr, whole: stdout is the envelope alone
    assert result.stderr.count(b".cpp.o\n") == 40000 and b"\nmake: *** [all] Error 2\n" in result.stderr


def test_from_command_text_report_follows_the_commands_own_output():
    code = "import sys; print('compiling'); sys.stderr.write('warning: x\\n'); sys.exit(4)"
    result = doctor_bytes("--no-facts", "--from-command", "--", sys.executable, "-c", code)
    assert result.returncode == 4 and result.stdout.startswith(b"compiling\n[")
    assert result.stderr == b"warning: x\n"


def test_from_command_output_passes_on_while_the_command_runs(tmp_path):
    # the output came only once the command had ended: a 1-hour build showed nothing for an hour
    go = tmp_path / "go"
    code = (f"import os, sys, time; print('started', flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\nprint('done')")
    full = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen([sys.executable, "-m", "doctor", "explain", "--timeout", "60", "--from-command", "--",
                           sys.executable, "-c", code], stdout=subprocess.PIPE, env=full, cwd=tmp_path) as proc:
        first = proc.stdout.readline()  # the command waits for `go` to end: this line must come first
        go.touch()
        rest = proc.stdout.read()
        assert proc.wait(60) == 0
    assert (first, rest) == (b"started\n", b"done\n")


def test_from_command_says_when_it_read_only_the_start_of_the_output(monkeypatch):
    import doctor.commands.explain as explain_command

    monkeypatch.setattr(explain_command, "READ_LIMIT", 64 << 10)
    code = f"import sys; print('x' * 200_000); print({LOADER_LINE!r}); sys.exit(2)"
    result = invoke("--no-facts", "--json", "--from-command", "--", *python(code))
    report = json.loads(result.stdout)
    assert [f["id"] for f in report["findings"]] == ["command.failed"] and result.exit_code == 2
    (area,) = report["areas"]
    assert area["summary"] == ("the command failed (exit 2); no known setup cause found; only its first 64.0 KiB "
                               "were read, the limit for a log; 131.4 KiB more were passed on unread")
    assert report["facts"]["command"]["output_read"] == 64 << 10
    assert report["facts"]["command"]["output_unread"] == 200_001 + len(LOADER_LINE) + 1 - (64 << 10)


def test_from_command_says_when_the_temporary_folder_took_no_more(tmp_path):
    # `ulimit -f`: the temporary file that keeps the output stops growing at 8 KiB (EFBIG)
    code = "import sys; print('x' * 100_000); sys.exit(2)"
    result = subprocess.run(["bash", "-c", 'ulimit -f 8; exec "$@"', "bash", sys.executable, "-m", "doctor", "explain",
                             "--no-facts", "--json", "--from-command", "--", sys.executable, "-c", code],
                            capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)},
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    summary = json.loads(result.stdout)["areas"][0]["summary"]
    assert summary.endswith("; only its first 8.0 KiB were read, as the temporary file could take no more "
                            "(File too large); 89.7 KiB more were passed on unread"), summary
    assert result.stderr == b"x" * 100_000 + b"\n"


@pytest.mark.parametrize("flag", ["--format=text", "-v"])
def test_report_options_work(flag):
    result = invoke(str(ABI_LOG), flag)
    assert result.exit_code == 1 and "[abi.mismatch]" in result.stdout
