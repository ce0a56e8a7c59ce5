"""Checks of what was fetched: the archive's sha256 and the unpacked tree's NAR hash, against
what the user promised (--sha256) and what the lock recorded on first use."""

from __future__ import annotations

from pathlib import Path

from doctor.errors import DoctorError


class ChecksumMismatch(DoctorError):
    default_id = "fetch.checksum-mismatch"


# A lock entry's way out; --update-lock has nothing to do with a --sha256 the user gave.
_LOCK_HINT = ("nothing was installed; if the file really changed upstream, check why before trusting it "
              "(then --update-lock re-records it)")
_SHA256_HINT = ("nothing was installed; the archive is not the file --sha256 names: check the value and where it "
                "came from, and the URL, mirror or file serving the archive")


def check_sha256(actual: str, expected: str | None, what: str, origin: str, hint: str = _SHA256_HINT) -> None:
    """`actual` against `expected` from `origin` (--sha256 unless `hint` is the lock's)."""
    if expected is not None and actual.lower() != expected.lower():
        raise ChecksumMismatch(f"sha256 mismatch for {what}: expected {expected} ({origin}), got {actual}", hint)


def check_nar(actual: str, expected: str | None, what: str, origin: str) -> None:
    if expected is not None and actual != expected:
        raise ChecksumMismatch(
            f"NAR hash mismatch for the unpacked {what}: expected {expected} ({origin}), got {actual}",
            "nothing was installed; the archive unpacks to a different tree than the one recorded",
        )


def check_lock_entry(entry: dict | None, sha256: str, size: int, lock_path: Path | None, key: str,
                     what: str = "the archive") -> None:
    if not entry:
        return
    origin = f"{lock_path} [{key}]"
    check_sha256(sha256, entry.get("sha256"), what, origin, _LOCK_HINT)
    if isinstance(entry.get("size"), int) and entry["size"] != size:
        raise ChecksumMismatch(f"size mismatch: {origin} records {entry['size']} bytes, got {size}",
                               "nothing was installed; the archive is not the file the lock recorded (cut short, or "
                               "replaced upstream or by the mirror): fetch it again, and if it really changed, check "
                               "why before trusting it (then --update-lock re-records it)")


def check_parts(actual: list[str], recorded: dict, tree: Path, origin: str, excludes: tuple[str, ...]) -> None:
    """`--verify` by parts: the tree's NAR, part by part, against its record. A mismatch names
    the files in the first part that differs (the tree is walked once more to find them)."""
    expected = recorded["sha256"]
    if actual == expected:
        return
    from doctor.formats import listing
    from doctor.nar import nar_entries

    first = next((i for i, (a, b) in enumerate(zip(actual, expected)) if a != b), min(len(actual), len(expected)))
    differ = sum(a != b for a, b in zip(actual, expected)) + abs(len(actual) - len(expected))
    size = recorded["size"]
    names = nar_entries(tree, first * size, (first + 1) * size, excludes)
    where = listing(names, 3) if names else "nothing: the tree ends before it (entries were removed)"
    verb = "differs" if differ == 1 else "differ"
    raise ChecksumMismatch(
        f"the installed tree at {tree} has changed: {differ} of {len(expected)} parts of its NAR {verb} "
        f"from {origin}; the first holds {where}",
        "files in it were modified, added or removed since it was installed; "
        "re-install it with `doctor fetch-libtorch --force`",
    )


def check_installed(actual: str, expected: str | None, tree: Path, origin: str) -> None:
    """`--verify`: the installed tree against its record or the lock."""
    if expected is not None and actual != expected:
        raise ChecksumMismatch(
            f"the installed tree at {tree} has changed: its NAR hash is {actual}, {origin} says {expected}",
            "files in it were modified, added or removed since it was installed; "
            "re-install it with `doctor fetch-libtorch --force`",
        )
