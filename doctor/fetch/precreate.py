"""Create a streamed zip's folders and (empty) files ahead of its bytes, on a thread of its own.

With the central directory read first (directory.py), the names are known before the data:
this thread creates them, in the order of their local headers, while the stream (stream.py)
inflates the large libraries at the front of the archive. When the stream reaches an entry it
waits until the entry exists here and opens the file to fill it, instead of creating it then:
on a libtorch zip the ~9,500 creations (the file system's work, 45–700 µs each on the VMs
measured) overlap the transfer instead of following it. Files are created as the stream
creates its own, `O_EXCL|O_NOFOLLOW` and private (0o600, folders 0o700), so a name listed
twice or inside a file stops it, and the stream with it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

from doctor.fetch.directory import Planned

# How the streamed tree's files are created, here and by the stream itself (stream.py). O_BINARY:
# Windows opens a file in text mode without it (cpython#52646), and os.write would then turn every
# \n of a library into \r\n.
CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
          | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_WAIT = 0.05  # the longest sleep between looks, should a wake-up be missed


def make_dirs(root: bytes, parts: tuple[bytes, ...], include_self: bool, made: set[tuple[bytes, ...]]) -> None:
    """The folders of `parts` under `root` that are not in `made` yet (the last part too with
    `include_self`), private; EEXIST when one of them is already a file."""
    for i in range(1, len(parts) + include_self):
        if parts[:i] not in made:
            os.mkdir(os.path.join(root, *parts[:i]), 0o700)
            made.add(parts[:i])


class Precreator:
    """Starts at once; `wait_for(i)` until entry i exists, `stop()` to end it early."""

    def __init__(self, root: bytes, entries: Sequence[Planned]) -> None:
        self._root = root
        self._entries = entries
        self.done = 0  # entries 0 … done-1 exist
        self.failed: str | None = None
        self._bug: BaseException | None = None  # raised in the waiting thread: exit 3, not a quiet fallback
        self._ended = False
        self._stopped = False
        self._waiting = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="doctor-precreate", daemon=True)
        self._thread.start()

    def wait_for(self, index: int, cancelled: Callable[[], bool]) -> str | None:
        """None once entry `index` exists; else why it never will."""
        while self.done <= index:
            if self._bug is not None:
                raise self._bug
            if self.failed is not None:
                return self.failed
            if self._ended or cancelled():
                return "the files were not created ahead"
            self._waiting = True
            with self._cond:
                if self.done <= index and not self._ended:
                    self._cond.wait(_WAIT)
        return None

    def stop(self) -> None:
        self._stopped = True
        self._thread.join()

    def _run(self) -> None:
        made: set[tuple[bytes, ...]] = {()}
        try:
            for i, entry in enumerate(self._entries):
                if self._stopped:
                    return
                make_dirs(self._root, entry.parts, entry.is_dir, made)
                if not entry.is_dir:
                    os.close(os.open(os.path.join(self._root, *entry.parts), CREATE, 0o600))
                self.done = i + 1
                if self._waiting:
                    with self._cond:
                        self._cond.notify_all()
        except OSError as exc:  # a name twice, a file where a folder goes, a full disk
            self.failed = f"creating the files ahead: {exc}"
        except BaseException as exc:
            self._bug = exc
        finally:
            with self._cond:
                self._ended = True
                self._cond.notify_all()
