"""Host.ask: a question whose answer cannot change during one run (`nvcc --version`) runs once,
even when the toolchain and CUDA-toolkit probes ask it at the same moment (issue 19)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from doctor.host import Host


def test_one_run_per_question_even_when_asked_at_once(tmp_path):
    calls = tmp_path / "calls"
    tool = tmp_path / "bin" / "nvcc"
    tool.parent.mkdir()
    tool.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nsleep 0.2\necho "Cuda compilation tools, release 13.0, V13.0.88"\n')
    tool.chmod(0o755)
    host = Host.for_test(tmp_path)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: host.ask([str(tool), "--version"]), range(4)))
    assert all(a.ok and "release 13.0" in a.stdout for a in answers)
    assert calls.read_text().splitlines() == ["--version"]
    # another question, or another Host (another run), is asked afresh
    assert host.ask([str(tool), "--list-gpu-code"]).ok
    assert Host.for_test(tmp_path).ask([str(tool), "--version"]).ok
    assert calls.read_text().splitlines() == ["--version", "--list-gpu-code", "--version"]


def test_an_error_while_asking_reaches_every_asker_instead_of_a_wait_forever(tmp_path, monkeypatch):
    # e.g. "can't start new thread" under a memory limit: the askers waiting on the answer used
    # to wait forever, and `check` hung
    import threading
    import time

    def run(self, argv, timeout=5.0, **kw):
        time.sleep(0.3)  # the other askers arrive and wait for this answer
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(Host, "run", run)
    host = Host.for_test(tmp_path)
    results: list[str] = []

    def ask() -> None:
        try:
            host.ask(["nvcc", "--version"])
        except RuntimeError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(3)]  # daemon: a hang fails, not blocks
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results == ["can't start new thread"] * 3


def test_an_answer_left_unset_by_an_interrupted_asker_stops_the_wait_once_the_run_ends(tmp_path, monkeypatch):
    """A Ctrl-C can land in the asker that registered a question before it asks: the others must
    not wait on that answer forever (the pool that runs them would then never shut down)."""
    import time
    from concurrent.futures import Future

    import doctor.host as host_module

    host = Host.for_test(tmp_path)
    host._answers[(("nvcc", "--version"), 5.0)] = Future()  # registered, never to be answered
    monkeypatch.setattr(host_module, "_STOPPING", True)  # what kill_running sets when the signal lands
    start = time.monotonic()
    answer = host.ask(["nvcc", "--version"])
    assert answer.returncode is None and answer.error == "nvcc: not answered, the run is ending"
    assert time.monotonic() - start < 5
