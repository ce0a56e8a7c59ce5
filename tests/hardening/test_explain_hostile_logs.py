"""`doctor explain` on hostile logs: crafted lines, floods of one line, huge logs, odd line ends,
bytes that are not UTF-8, commands that die of a signal. Linear in the log by construction
(docs/security.md, "explain: hostile logs"); the CPU budgets below are complexity guards, not speed
tests (scripts/bench-explain measures speed): each is many times what the work costs here, and is
held against the least of repeated runs (testsupport's cpu_seconds), so only a cost that comes back
every time, as backtracking does, can fail it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from re import _constants as sre_c
from re import _parser as sre_parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testsupport.support import REPO, cpu_seconds, doctor_subprocess

from doctor.explain.engine import MAX_LINE, explain_text, normalise, scan
from doctor.explain.patterns import TABLE

LOGS = Path(__file__).resolve().parents[2] / "tests/fixtures/logs"
LINKER = "/usr/bin/ld: cannot find -ltorch_cpu"
HEADER = "main.cpp:1:10: fatal error: torch/torch.h: No such file or directory"
SIGNS = [(rule.id, sign) for rule in TABLE for sign in rule.signs]
# What \w, \s, \d, \S, \W stand for when an adversary builds a line out of them.
CATEGORY = {sre_c.CATEGORY_WORD: "a_1", sre_c.CATEGORY_NOT_WORD: " :/'", sre_c.CATEGORY_SPACE: " \t",
            sre_c.CATEGORY_NOT_SPACE: "a/.:", sre_c.CATEGORY_DIGIT: "7", sre_c.CATEGORY_NOT_DIGIT: "a "}


def literals(pattern: str) -> list[str]:
    """Every literal run and every class member a pattern names: the pieces an attacker starts from."""
    out: set[str] = set()

    def walk(items) -> None:
        run: list[str] = []
        for op, av in items:
            if op is sre_c.LITERAL:
                run.append(chr(av))
                continue
            if run:
                out.add("".join(run))
                run = []
            if op is sre_c.IN:
                for o, a in av:
                    if o is sre_c.LITERAL:
                        out.add(chr(a))
                    elif o is sre_c.RANGE:
                        out.update((chr(a[0]), chr(a[1])))
                    elif o is sre_c.CATEGORY:
                        out.update(CATEGORY.get(a, ""))
            elif op is sre_c.CATEGORY:
                out.update(CATEGORY.get(av, ""))
            elif op is sre_c.SUBPATTERN:
                walk(av[-1])
            elif op is sre_c.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
                walk(av[2])
            elif op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
                walk(av[1])
            elif op is sre_c.ATOMIC_GROUP:
                walk(av)
        if run:
            out.add("".join(run))

    walk(sre_parse.parse(pattern))
    return sorted(out)


def crafted(needle: str, unit: str, where: float) -> str:
    """A MAX_LINE line: the unit repeated, the sign's needle placed at a fraction `where` of it."""
    body = (unit * (MAX_LINE // max(1, len(unit)) + 1))[:MAX_LINE - len(needle)]
    at = int(len(body) * where)
    return body[:at] + needle + body[at:]


@pytest.mark.parametrize("rule_id,sign", SIGNS, ids=[f"{r}:{i}" for i, (r, _) in enumerate(SIGNS)])
def test_a_4kb_line_crafted_from_a_patterns_literals_takes_milliseconds(rule_id, sign):
    """Each pattern against the lines most likely to make it backtrack: its own pieces, repeated."""
    pieces = literals(sign.regex.pattern) + list(sign.needles)
    worst = 0.0
    for needle in sign.needles:
        for a in pieces:
            for b in ("", " ", "/", "a", "'", a):
                for where in (0.0, 0.5):
                    line = crafted(needle, a + b, where)
                    worst = max(worst, cpu_seconds(lambda: sign.regex.search(line), 0.015)[0])
    assert worst < 0.015, f"{rule_id}: {sign.regex.pattern[:80]!r} took {worst * 1000:.1f} ms on a 4 KB line"


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_property_adversarial_lines_from_each_patterns_literals(data):
    """Hypothesis mixes one pattern's literals into a 4 KB line; the whole engine must stay fast."""
    rule_id, sign = data.draw(st.sampled_from(SIGNS))
    pieces = literals(sign.regex.pattern) + list(sign.needles)
    unit = "".join(data.draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=12)))
    needle = data.draw(st.sampled_from(sign.needles))
    line = crafted(needle, unit, data.draw(st.floats(0, 1)))
    assert cpu_seconds(lambda: sign.regex.search(line), 0.025)[0] < 0.025, (rule_id, line[:120])
    assert cpu_seconds(lambda: explain_text(line + "\n" + line), 0.1)[0] < 0.1, (rule_id, line[:120])


def test_40000_identical_matching_lines_in_seconds():
    log = (LINKER + "\n") * 40_000
    took, found = cpu_seconds(lambda: explain_text(log), 5)
    assert took < 5
    (finding,) = found
    assert finding.id == "link.library-missing"
    assert "... and 39995 more lines like these" in finding.detail


def test_40000_distinct_matching_lines_group_in_linear_time():
    log = "".join(f"/usr/bin/ld: cannot find -ltorch_x{i}\n" for i in range(40_000))
    took, found = cpu_seconds(lambda: explain_text(log), 10)
    assert took < 10
    assert [f.id for f in found] == ["link.library-missing"]


def test_a_100mb_log_in_seconds():
    """A realistic 100 MB log (build noise with the real corpus logs spread through it)."""
    rng = random.Random(11)
    corpus = [p.read_bytes() for p in sorted(LOGS.glob("*.log"))]
    noise = b"".join(b"[ %2d%%] Building CXX object src/CMakeFiles/app.dir/layer%d.cpp.o\n" % (i % 100, i)
                     for i in range(20_000))
    parts, size = [], 0
    while size < 100_000_000:
        chunk = rng.choice(corpus) if rng.random() < 0.05 else noise
        parts.append(chunk)
        size += len(chunk)
    log = b"".join(parts)
    took, found = cpu_seconds(lambda: explain_text(log), 30)
    assert took < 30  # this thread's: the later slices' needle search (RE2, linear) runs beside it
    used = b"".join(dict.fromkeys(parts))  # each distinct chunk once: the same problems, a small log
    assert [f.id for f in found] == [f.id for f in explain_text(used)] and found


def test_cr_only_line_ends_are_lines():
    log = "progress 10%\rprogress 20%\r" + HEADER + "\rdone\r"
    (finding,) = explain_text(log)
    assert finding.evidence[0].source == "log:3"
    assert normalise(log).count(b"\n") == 4


def test_a_huge_line_of_cr_and_escapes_is_linear():
    assert cpu_seconds(lambda: normalise(b"\x1b]" * 2_000_000 + b"\x07"), 5)[0] < 5
    assert cpu_seconds(lambda: explain_text("\r" * 5_000_000 + HEADER), 5)[0] < 5


def test_colour_codes_cut_at_the_line_end():
    # An OSC never closed on its line must not swallow the lines after it.
    log = "\x1b]0;title\n" + HEADER + "\n\x07"
    assert [f.id for f in explain_text(log)] == ["headers.missing"]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000))
def test_fuzz_any_text_never_raises(text):
    explain_text(text)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=200), st.sampled_from([
    LINKER.encode(), HEADER.encode(), b"\r", b"\n", b"\x1b[31m", b"\x1b]", b"\xff\xfe", "没有那个文件或目录".encode()[:5]])),
    max_size=40))
def test_fuzz_any_bytes_never_raise(parts):
    for finding in explain_text(b"".join(parts)):
        assert finding.id and finding.detail


def test_non_utf8_stdin_is_read_not_crashed_on(tmp_path):
    log = b"\xff\xfe garbage \x80\x81\n" + HEADER.encode() + b" \xe9t\xe9\n\xc3\x28\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR", "GITHUB_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-m", "doctor", "explain", "-", "--no-facts"], input=log,
                            capture_output=True, env=env, cwd=tmp_path, timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 1, result.stderr.decode()
    assert "[headers.missing]" in out and "line 2:" in out


def test_non_utf8_log_file(tmp_path):
    path = tmp_path / "latin1.log"
    path.write_bytes("Fehler: Datei nicht gefunden, Größe\n".encode("latin-1") + LINKER.encode() + b"\n")
    result = doctor_subprocess("explain", str(path), "--no-facts")
    assert result.returncode == 1 and "[link.library-missing]" in result.stdout, result.stderr


def test_process_substitution_is_read_as_a_log():
    # bash hands the doctor /dev/fd/63, a pipe: read to its end, like stdin
    script = f'"$0" -m doctor explain --no-facts <(printf "%s\\n" "{LINKER}")'
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(["bash", "-c", script, sys.executable], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1 and "[link.library-missing]" in result.stdout, result.stderr


def test_named_fifo_waits_for_its_writer_and_is_read_to_its_end(tmp_path):
    fifo = tmp_path / "build.log"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "explain", "--no-facts", str(fifo)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    time.sleep(1.0)  # the build starts writing later than the doctor starts reading
    assert proc.poll() is None, proc.communicate()
    with os.fdopen(_open_writer(fifo, proc), "w") as writer:
        writer.write("compiling\n" * 1000)
        time.sleep(0.2)  # the doctor waits for the rest rather than taking a half-written log
        writer.write(HEADER + "\n")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "[headers.missing]" in out and "line 1001" in out, err


def _open_writer(fifo: Path, reader: subprocess.Popen) -> int:
    """The FIFO's write end once `reader` has it open (ENXIO until then), never a hang."""
    deadline = time.monotonic() + 60
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return fd
        except OSError:
            assert reader.poll() is None and time.monotonic() < deadline, reader.communicate()
            time.sleep(0.02)


def test_a_device_is_not_read_and_says_so():
    result = doctor_subprocess("explain", "--no-facts", "/dev/zero")
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "error: /dev/zero is a device or a socket, not a log file"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_from_command_killed_by_a_signal_exits_128_plus_n(signum):
    code = f"import os, signal; print('working'); os.kill(os.getpid(), {int(signum)})"
    result = doctor_subprocess("explain", "--no-facts", "--from-command", "--", sys.executable, "-c", code)
    assert result.returncode == 128 + signum, (result.stdout, result.stderr)
    assert f"killed by signal {int(signum)} ({signum.name})" in result.stdout


def _gone(pid: int) -> bool:
    """Dead: reaped, or a zombie no one has reaped yet (a container's first process may not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize("sig, code, said", [(signal.SIGTERM, 143, "Terminated (SIGTERM)."),
                                              (signal.SIGINT, 130, "Interrupted.")])
def test_from_command_ended_by_a_signal_takes_the_command_along(tmp_path, sig, code, said):
    # the command runs in a session of its own (a timeout kills its whole group): a Ctrl-C or
    # SIGTERM that ends the doctor must kill it too, not leave a build running
    pid_file = tmp_path / "cmd.pid"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "explain", "--no-facts", "--from-command", "--", "sh", "-c",
                             f"echo $$ > {pid_file}; echo working; exec sleep 300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        command = int(pid_file.read_text())
        time.sleep(0.2)  # "working" on its way
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == code and err.decode().strip().endswith(said), err
        assert out == b"working\n"
        deadline = time.monotonic() + 10
        while not _gone(command):
            assert time.monotonic() < deadline, "the command outlived the doctor"
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
        if pid_file.exists() and not _gone(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
