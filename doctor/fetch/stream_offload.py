"""Inflate the large entries of a streamed zip on a thread of their own, from the partial file.

A libtorch zip is thousands of small headers and a few large libraries. Unpacked in order on
one thread, the two costs add up: creating the small files (~220 µs each here: 2 s for a CPU
build) and inflating the libraries (1.3 s), although the first is the kernel's work and the
second zlib's, and both release the GIL. So the stream (stream.py) hands each large entry to
this thread and goes on with the next headers at once: the entry's bytes are already in the
partial file the download writes before it feeds the stream, and this thread reads them from
there (`os.pread`) as they arrive. It checks what the stream checks: the size and CRC-32 the
local header states, and an output bounded by that size (a large entry is handed over only
when its stated size is within the stream's inflate ratio). Measured in docs/performance.md.
"""

from __future__ import annotations

import collections
import os
import threading
import zlib

from doctor.record import record

BIG = 4 << 20  # compressed bytes from which an entry is inflated here
CHUNK = 1 << 20  # one read of the partial file; also the most one inflate call produces
_WAIT = 0.05  # seconds between looks at the file when the stream says more has arrived than it holds


@record(frozen=True)
class Job:
    """A large entry: its file (created, empty, owned by the job from now on) and where its data lies."""

    fd: int
    data_at: int
    csize: int
    usize: int
    crc: int
    deflated: bool
    name: str


class _Stopped(Exception):
    pass


class _TooLarge(Exception):
    pass


class Offload:
    """`add` jobs and tell it how far the archive has `arrived` in the partial file; `close`
    when the stream is complete (returns why a job failed, or None), or `stop` to give up."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._cond = threading.Condition()
        self._jobs: collections.deque[Job] = collections.deque()
        self._arrived = 0
        self._complete = False  # every byte is in the file: a short read is then an error
        self._stopped = False
        self.failed: str | None = None
        self.finished: list[Job] = []  # jobs whose size and CRC-32 matched their header
        self._thread = threading.Thread(target=self._run, name="doctor-stream-offload", daemon=True)
        self._thread.start()

    def add(self, job: Job) -> None:
        with self._cond:
            self._jobs.append(job)
            self._cond.notify()

    def arrived(self, position: int) -> None:
        with self._cond:
            self._arrived = position
            self._cond.notify()

    def close(self) -> str | None:
        with self._cond:
            self._complete = True
            self._cond.notify()
        self._thread.join()
        return self.failed

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join()
        for job in self._jobs:  # never started
            os.close(job.fd)
        self._jobs.clear()

    def _run(self) -> None:
        src = None
        try:
            while True:
                with self._cond:
                    while not self._jobs and not (self._complete or self._stopped):
                        self._cond.wait()
                    if self._stopped or not self._jobs:
                        return
                    job = self._jobs.popleft()
                if src is None:
                    src = os.open(self._source, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
                try:
                    why = self._inflate(src, job)
                finally:
                    os.close(job.fd)
                if why is not None:
                    self.failed = f"entry {job.name!r}: {why}"
                    return
                self.finished.append(job)
        except _Stopped:
            return
        except Exception as exc:  # never leave close() or stop() waiting on a dead thread
            self.failed = self.failed or f"{type(exc).__name__}: {exc}"
        finally:
            if src is not None:
                os.close(src)

    def _inflate(self, src: int, job: Job) -> str | None:
        inflater = zlib.decompressobj(-15) if job.deflated else None
        pos, end, crc, size = job.data_at, job.data_at + job.csize, 0, 0

        def write(out) -> None:
            nonlocal crc, size
            size += len(out)
            if size > job.usize:
                raise _TooLarge
            crc = zlib.crc32(out, crc)
            view = memoryview(out)
            while view:
                view = view[os.write(job.fd, view):]

        try:
            while pos < end:
                data = os.pread(src, self._ready(pos, min(end, pos + CHUNK)), pos)
                if not data:  # the download's last bytes may still be in its write buffer
                    self._pause()
                    continue
                pos += len(data)
                if inflater is None:
                    write(data)
                    continue
                write(inflater.decompress(data, CHUNK))
                while inflater.unconsumed_tail and not inflater.eof:
                    write(inflater.decompress(inflater.unconsumed_tail, CHUNK))
                if inflater.eof and (inflater.unused_data or pos < end):
                    return "a deflate stream's end disagrees with its local header's size"
            if inflater is not None:
                if not inflater.eof:
                    return "a deflate stream's end disagrees with its local header's size"
                write(inflater.flush())
        except _TooLarge:
            return "it inflates to more than its local header says"
        except zlib.error as exc:
            return f"zlib: {exc}"
        if (crc, size) != (job.crc, job.usize):
            return "its size or CRC-32 disagrees with its header"
        return None

    def _ready(self, pos: int, want: int) -> int:
        """How many bytes from `pos` (up to `want`) the stream has seen; waits for some."""
        with self._cond:
            while self._arrived <= pos and not self._complete and not self._stopped:
                self._cond.wait()
            if self._stopped:
                raise _Stopped
            return want - pos if self._complete else min(want, self._arrived) - pos

    def _pause(self) -> None:
        with self._cond:
            if self._stopped:
                raise _Stopped
            if self._complete:
                raise OSError("the partial file is shorter than the archive")
            self._cond.wait(_WAIT)
