"""User-facing errors: one line saying what was wrong and what to do; the CLI maps them to exit codes."""

from __future__ import annotations


class DoctorError(Exception):
    """A problem the user can fix. Exit code 1 unless `exit_code` says otherwise."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(DoctorError):
    """Bad input on the command line or in a policy file: exit code 2."""

    exit_code = 2
