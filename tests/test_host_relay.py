"""Host.relay runs a command in the foreground as `cmd | tee` would: its bytes pass on verbatim and
as they come, stdout to one stream and stderr to the other, while the first bytes of both, in
arrival order, are kept (in a temporary file) for `explain --from-command` to read."""

from __future__ import annotations

import io
import sys
import threading
import time

from doctor.host import AFTER_EXIT, Host


class Sink(io.RawIOBase):
    """A binary stream that remembers what it got, and when the first bytes came."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.first_at: float | None = None
        self.lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, chunk) -> int:
        with self.lock:
            if self.first_at is None:
                self.first_at = time.monotonic()
            self.data += chunk
        return len(chunk)


def _host(tmp_path, script: str) -> Host:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return Host.for_test(tmp_path, env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})


def _relay(host: Host, argv, timeout: float = 60, keep: int = 1 << 30):
    out, err = Sink(), Sink()
    return host.relay(argv, timeout, out, err, keep), out, err


def test_bytes_pass_on_verbatim_and_are_kept_in_arrival_order(tmp_path):
    # over Host.run's 1 MiB: a build's output was cut to its head and tail, CR turned into LF and
    # undecodable bytes replaced, then printed only at the end, stdout before stderr
    code = ("import sys, time\n"
            "o, e = sys.stdout.buffer, sys.stderr.buffer\n"
            "o.write(b'progress 1%\\rprogress 2%\\r\\n\\xff\\xfe\\x00 raw\\n'); o.flush(); time.sleep(0.3)\n"
            "e.write(b'warning: first\\n'); e.flush(); time.sleep(0.3)\n"
            "o.write(b'x' * 3_000_000 + b'\\n'); o.flush(); time.sleep(0.3)\n"
            "e.write(b'error: last\\n'); e.flush()\n"
            "sys.exit(2)\n")
    run, out, err = _relay(Host.for_test(tmp_path), [sys.executable, "-c", code])
    assert (run.returncode, run.timed_out, run.dropped, run.error) == (2, False, 0, "")
    stdout = b"progress 1%\rprogress 2%\r\n\xff\xfe\x00 raw\n" + b"x" * 3_000_000 + b"\n"
    assert bytes(out.data) == stdout and bytes(err.data) == b"warning: first\nerror: last\n"
    assert run.output == (b"progress 1%\rprogress 2%\r\n\xff\xfe\x00 raw\nwarning: first\n" + b"x" * 3_000_000
                          + b"\nerror: last\n")


def test_output_passes_on_while_the_command_runs(tmp_path):
    started = tmp_path / "go"
    host = _host(tmp_path, f"echo started\nwhile [ ! -e {started} ]; do sleep 0.05; done\necho done\n")
    out = Sink()
    result = {}
    thread = threading.Thread(target=lambda: result.update(run=host.relay(["tool"], 30, out, Sink(), 1 << 20)))
    thread.start()
    deadline = time.monotonic() + 20
    while bytes(out.data) != b"started\n":
        assert time.monotonic() < deadline, "the first line never came while the command ran"
        time.sleep(0.02)
    started.touch()  # the command ends only now
    thread.join(30)
    assert result["run"].returncode == 0 and bytes(out.data) == b"started\ndone\n"


def test_only_the_first_bytes_asked_for_are_kept(tmp_path):
    run, out, _ = _relay(_host(tmp_path, "head -c 5000 /dev/zero | tr '\\0' a\nexit 1\n"), ["tool"], keep=1000)
    assert run.returncode == 1 and len(out.data) == 5000
    assert run.output == b"a" * 1000 and run.dropped == 4000 and run.spool_error == ""


def test_a_hung_command_is_killed_at_its_timeout_and_what_it_printed_kept(tmp_path):
    start = time.monotonic()
    run, out, _ = _relay(_host(tmp_path, "echo started\nexec sleep 60\n"), ["tool"], timeout=1)
    assert run.timed_out and run.returncode is None and run.error == "tool timed out after 1 s"
    assert run.output == b"started\n" == bytes(out.data)
    assert time.monotonic() - start < 10


def test_a_child_left_holding_the_pipes_is_not_waited_for(tmp_path):
    start = time.monotonic()
    run, out, _ = _relay(_host(tmp_path, "sleep 30 &\necho parent done\nexit 3\n"), ["tool"], timeout=60)
    assert (run.returncode, run.timed_out, run.output) == (3, False, b"parent done\n")
    assert time.monotonic() - start < AFTER_EXIT + 10


def test_a_missing_command_is_an_error_not_a_run(tmp_path):
    run, out, err = _relay(Host.for_test(tmp_path), ["no-such-tool"])
    assert run.returncode is None and not run.timed_out and run.error == "no-such-tool: not found on PATH"


def test_a_reader_that_went_away_stops_the_passing_on_not_the_command(tmp_path):
    class Gone(Sink):
        def write(self, chunk) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    host = _host(tmp_path, "head -c 300000 /dev/zero\necho end >&2\nexit 5\n")
    err = Sink()
    run = host.relay(["tool"], 60, Gone(), err, 1 << 20)
    assert run.returncode == 5 and len(run.output) == 300004 and bytes(err.data) == b"end\n"
