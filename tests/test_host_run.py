"""Host.run waits on the command's output, not by polling the process (issue 19), and still
never waits past its timeout: not for a hung command, nor for a child's child that keeps the
pipes open after the command itself has exited."""

from __future__ import annotations

import time

from doctor.host import Host


def _host(tmp_path, script: str) -> Host:
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return Host.for_test(tmp_path)


def test_output_and_status_of_a_command_that_exits(tmp_path):
    run = _host(tmp_path, "echo out; echo err >&2; exit 3\n").run(["tool"])
    assert (run.returncode, run.stdout, run.stderr, run.timed_out) == (3, "out\n", "err\n", False)


def test_a_hung_command_is_killed_at_its_timeout(tmp_path):
    start = time.monotonic()
    run = _host(tmp_path, "echo started; exec /bin/sleep 60\n").run(["tool"], timeout=1)
    assert run.timed_out and run.returncode is None and run.error == "tool timed out after 1 s"
    assert run.stdout == "started\n"
    assert time.monotonic() - start < 10  # killed, not waited out


def test_a_command_whose_child_keeps_the_pipes_open_returns_after_its_timeout(tmp_path):
    """The command exits at once but leaves a child holding stdout: its status and what it
    printed come back once the timeout is spent, not after the child's 20 s."""
    start = time.monotonic()
    run = _host(tmp_path, "/bin/sleep 20 &\necho parent done\nexit 0\n").run(["tool"], timeout=1)
    assert (run.returncode, run.stdout, run.timed_out) == (0, "parent done\n", False)
    assert time.monotonic() - start < 10


def test_a_command_that_will_not_die_is_left_behind_not_waited_for(tmp_path, monkeypatch):
    """A SIGKILL the kernel holds back (nvidia-smi in D state on a GPU that fell off the bus) is
    what the doctor cannot fix: the kill is made to miss here, and the run must still return."""
    import os
    import signal

    import doctor.host as host_module

    monkeypatch.setattr(host_module, "_kill_group", lambda proc: None)
    monkeypatch.setattr(host_module, "KILL_GRACE", 0.5)
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    run = _host(tmp_path, f"echo $$ > {pid_file}; exec /bin/sleep 60\n").run(["tool"], timeout=0.5)
    try:
        assert run.timed_out and run.returncode is None and "did not die when killed" in run.error
        assert time.monotonic() - start < 10
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
