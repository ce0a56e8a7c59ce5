"""User-facing errors: one line saying what was wrong and what to do; the CLI maps them to exit codes.

Each error carries a stable `id` (as pip's DiagnosticPipError carries a `reference`): the
`error.id` of the JSON envelope (docs/json-schema.md), so a CI script can tell "the download
failed" from "the lock file disagrees" without matching message text. Ids are
`<area>.<what>`: `usage.*` for bad input (exit 2), `io.<errno>` for file-system errors,
`fetch.*`, `lock.*`, `emit.*`, ... for the rest; `error` when nothing more precise was given.
"""

from __future__ import annotations


class DoctorError(Exception):
    """A problem the user can fix. Exit code 1 unless `exit_code` says otherwise."""

    exit_code = 1
    default_id = "error"

    def __init__(self, message: str, hint: str = "", error_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.id = error_id or self.default_id  # `error.id` in the JSON envelope

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(DoctorError):
    """Bad input on the command line or in a policy file: exit code 2."""

    exit_code = 2
    default_id = "usage.bad-input"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so the run ends as Ctrl-C ends it: through
    every `finally` (a fetch removes its half-written tree), then exit 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def out_of_resources(exc: BaseException) -> bool:
    """Memory or threads ran out (`ulimit -v`, a container's limit): the world's fault, neither a
    damaged file's nor the doctor's (the CLI's env.out-of-resources, exit 1)."""
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and str(exc).startswith("can't start new thread"))


def reraise_out_of_resources(exc: BaseException) -> None:
    """For an `except Exception` that names a damaged file or a failed probe: running out of memory
    is neither, and a tight limit once had check call libtorch_cpu.so "not a usable ELF file"
    with the fix "install it again". The run ends with the one error that names the limit."""
    if out_of_resources(exc):
        raise exc
