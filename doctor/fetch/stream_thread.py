"""Run the streaming unzip (stream.py) on a thread of its own, beside the download.

The download's thread receives, hashes (sha256) and writes the partial file; this thread
parses, inflates and writes the tree. zlib, hashlib and the file system calls release the
GIL, so on two cores the transfer is not held up by the unpack (nor the unpack by a burst
of the transfer); measured in docs/performance.md. At most QUEUED chunks wait (16 MiB of
256 KiB reads), so a slow disk slows the download instead of filling memory.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

from doctor.fetch.directory import Directory
from doctor.fetch.stream import Streamed, StreamUnzip

QUEUED = 64


class ThreadedUnzip:
    """The `StreamUnzip` interface (feed, abandon, finish, root, entries, position), with
    `feed` handing each chunk over to the unzip's thread."""

    def __init__(self, unzip: StreamUnzip) -> None:
        self.unzip = unzip
        self.position = 0  # bytes handed over (the download compares it with its offset)
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUED)
        self._bug: BaseException | None = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="doctor-stream-unzip", daemon=True)
        self._thread.start()

    @property
    def root(self) -> Path:
        return self.unzip.root

    @property
    def entries(self) -> dict[int, Streamed]:
        return self.unzip.entries

    def use_directory(self, directory: Directory) -> bool:
        return self.unzip.use_directory(directory)  # before the first feed: the thread is still idle

    def feed(self, data: bytes) -> None:
        self.position += len(data)
        self._queue.put(data)

    def abandon(self, why: str) -> None:
        if self.unzip.failed is None:
            self.unzip.failed = why  # the thread skips what is still queued
        self._join()
        self.unzip.abandon(why)

    def finish(self) -> str | None:
        self._join()
        if self._bug is not None:  # a bug of the unzip: reported (exit 3), not hidden by the fallback
            bug, self._bug = self._bug, None
            raise bug
        return self.unzip.finish()

    def _join(self) -> None:
        if self._thread is not None:
            thread, self._thread = self._thread, None
            self._queue.put(None)
            thread.join()

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            try:
                self.unzip.feed(data)
            except BaseException as exc:  # never leave the download waiting on a dead thread
                self._bug = self._bug or exc
                if self.unzip.failed is None:
                    self.unzip.failed = f"{type(exc).__name__}: {exc}"
