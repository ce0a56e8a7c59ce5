"""Host.read_bytes on what a user or a hostile machine puts where a file is expected: real FIFOs
under a Host over a temporary root."""

from __future__ import annotations

import os
import threading

import doctor.host as host_module
from doctor.host import Host

LOG = b"/usr/bin/ld: cannot find -ltorch_cpu\n"


def test_a_fifo_whose_writer_finishes_at_once_is_read_whole(tmp_path, monkeypatch):
    """`printf ... > build.log &` then `doctor explain build.log`: the writer waits in open() for a
    reader, then writes and closes at once. However long the doctor takes between opening the FIFO and
    reading it (here: until the writer is done), the text must come back, not a wait for another writer."""
    os.mkfifo(tmp_path / "build.log")
    written = threading.Event()

    def writer() -> None:
        with open(tmp_path / "build.log", "wb") as out:  # blocks until the doctor opens the FIFO
            out.write(LOG)
        written.set()

    fstat = os.fstat

    def fstat_once_written(fd: int) -> os.stat_result:
        written.wait(10)
        return fstat(fd)

    monkeypatch.setattr(host_module.os, "fstat", fstat_once_written)
    threading.Thread(target=writer, daemon=True).start()
    got: list = []
    reader = threading.Thread(target=lambda: got.append(Host.for_test(tmp_path).read_bytes("/build.log", pipe=True)),
                              daemon=True)
    reader.start()
    reader.join(15)
    if reader.is_alive():  # waiting for a second writer: be that writer, so the thread ends, and fail
        os.close(os.open(tmp_path / "build.log", os.O_WRONLY))
        reader.join(5)
    assert got == [LOG]


def test_a_fifo_is_refused_at_once_where_a_file_is_expected(tmp_path):
    """libc10.so or version.txt as a FIFO nobody writes: None, not a wait (without `pipe`)."""
    os.mkfifo(tmp_path / "version.txt")
    assert Host.for_test(tmp_path).read_bytes("/version.txt") is None
