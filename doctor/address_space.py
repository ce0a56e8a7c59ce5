"""Threads that fit under a memory limit (`ulimit -v` or `ulimit -d` on a login node).

What a thread costs is address space, not memory: glibc gives every thread that allocates an
arena of its own, reserving 64 MiB, and every thread an 8 MiB stack. `check` runs about twenty
threads (probes side by side, two pipe readers per command): 1.2 GB reserved for 32 MB used.
Under `ulimit -v 1000000` most runs ended "can't start new thread". Under a limit the threads
now share one arena and get 2 MiB stacks: `check` reserves ~80 MB.

Below a floor the doctor refuses to start: a thread that dies of hunger while starting hangs
CPython's `Thread.start` for good (it waits for the thread to say it started), which happened
at 55 MiB; a clear error beats a run that may hang.
"""

from __future__ import annotations

import sys

from doctor.errors import DoctorError

FLOOR_BYTES = 128 << 20  # `check` peaks at ~80 MB of address space under a limit
STACK_BYTES = 2 << 20  # 1/4 of the usual stack; the doctor's threads never recurse deeply
_M_ARENA_MAX = -8  # glibc's malloc.h
_LIMITS = (("RLIMIT_AS", "address-space", "-v"), ("RLIMIT_DATA", "data", "-d"))


def fit_to_limits() -> None:
    """Make threads cheap in address space when the process runs under a limit, or say the limit
    is too small to run in; a no-op without one. Call before the first thread starts: glibc
    creates the arenas as threads first allocate."""
    try:
        import resource
    except ImportError:  # Windows
        return
    limited = False
    for name, what, flag in _LIMITS:
        soft = resource.getrlimit(getattr(resource, name))[0]
        if soft == resource.RLIM_INFINITY:
            continue
        if soft < FLOOR_BYTES:
            raise DoctorError(
                f"the {what} limit is {soft >> 20} MiB (ulimit {flag}), below the {FLOOR_BYTES >> 20} MiB the doctor needs",
                f"raise it in this shell (ulimit {flag} {2 * FLOOR_BYTES >> 10}), or run the doctor where the limit is higher",
                error_id="env.out-of-resources")
        limited = True
    if limited:
        _cheap_threads()


def _cheap_threads() -> None:
    import threading

    try:
        threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that cannot size stacks
        pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)  # musl has one heap already and ignores it
        except (ImportError, OSError, AttributeError, MemoryError):
            pass
