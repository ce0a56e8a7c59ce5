"""fetch-libtorch's pipeline: one fetch at a time per destination, verified, atomic.

1. take `<parent>/.<name>.lock` (guard.py: flock) — a second fetch waits, then finds the work done;
2. if the destination already holds this libtorch (install record matches; lock agrees),
   stop: nothing to do (also where nothing can be written: a read-only tree with --offline);
3. refuse to replace anything but a tree the doctor installed (destination.py);
4. get the archive (source.py) — a download is unpacked into a staging folder while it
   arrives (stream.py) — and install it (install.py: sha256 and lock checks; the streamed
   tree kept only when the central directory agrees (adopt.py), else an unpack from the file
   with the NAR hash in the same pass; tree checks, record, one-rename swap);
5. record the hashes in the lock on first use.

Any failure before the swap leaves the destination as it was.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

from doctor import writes
from doctor.errors import DoctorError
from doctor.fetch.fsops import cleanup_leftovers, os_error, remove_part, rmtree
from doctor.fetch.names import redact_url, safe_component
from doctor.fetch.plan import Plan
from doctor.fetch.record import NO_RECORD, NOT_HASHED, RECORD, UNFINISHED, InstallRecord, examine_record, marked
from doctor.host import Host
from doctor.record import record


@record
class FetchOptions:
    force: bool = False  # fetch and replace even when installed
    verify_tree: bool = False  # re-hash an installed tree instead of trusting its record
    offline: bool = False  # never download: succeed only when already installed (or from --archive)
    update_lock: bool = False  # re-record the lock entry instead of checking it
    keep_archive: bool = False
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 60.0


@record
class Outcome:
    action: str  # "installed" | "already-installed" | "verified"
    dest: Path
    record: dict
    lock: str | None = None  # "recorded" | "verified" | "updated" | None (no lock)
    replaced: bool = False
    seconds: float = 0.0


def record_matches(plan: Plan, record: InstallRecord | None, missing: str = NO_RECORD) -> tuple[bool, str]:
    """Whether `record` describes the libtorch `plan` asks for (and why not; `missing` when
    there is no usable record)."""
    if record is None:
        return False, missing
    wanted = {"variant": plan.variant, "platform": plan.platform, "abi": plan.abi, "debug": plan.debug}
    if plan.version is not None:
        wanted["version"] = plan.version
    else:
        wanted["channel"] = "nightly"
    for k, v in wanted.items():
        if getattr(record, k) != v:
            return False, f"the installed {k} is {getattr(record, k)!r}, not {v!r}"
    return True, ""


def fetch(host: Host, plan: Plan, opts: FetchOptions, log: Callable[[str], None],
          progress_stream=None) -> Outcome:
    started = time.monotonic()
    dest = _resolved(Path(host.real(plan.dest)))
    if plan.lock_path is not None:
        # The lock file is a path as the user sees it, like --dest: mapped the same way.
        from dataclasses import replace

        plan = replace(plan, lock_path=Path(host.real(plan.lock_path)))
        _check_lock_outside(plan.lock_path, dest)
    guard = _take_guard(dest, log)
    try:
        if guard is not None and guard.held:  # leftovers seen while holding the lock are dead
            cleanup_leftovers(dest.parent, dest.name)
        outcome = _run(host, plan, opts, dest, guard is not None, log, progress_stream)
        outcome.seconds = time.monotonic() - started
        return outcome
    finally:
        if guard is not None:
            guard.release()


def _resolved(dest: Path) -> Path:
    """`dest` as the folder it names, its parent resolved: the install lock, staging trees and the
    swap work on `parent/name`, and `deep/a/..` made `deep/a/....lock`, `/` a `/..lock`. The last
    component stays as given (a symlink there is refused, never followed), unless it is `.` or `..`.
    The root folder itself is refused before anything is created."""
    if dest.name in ("", ".", ".."):
        dest = Path(os.path.realpath(dest))
    else:
        dest = Path(os.path.realpath(dest.parent)) / dest.name
    if dest.name == "":
        from doctor.errors import UsageError

        raise UsageError(f"--dest {dest} is the root folder: a libtorch tree goes in a folder of its own",
                         "give --dest a folder for the tree alone (it is replaced whole), e.g. ~/libtorch")
    return dest


def _check_lock_outside(lock: Path, dest: Path) -> None:
    """A lock file inside the destination would be part of the tree: replaced (or deleted by
    --force) with it, and --verify would find the tree changed once the lock was written."""
    where, tree = Path(os.path.realpath(lock)), Path(os.path.realpath(dest))
    if where == tree or tree in where.parents:
        from doctor.errors import UsageError

        raise UsageError(f"the lock file {lock} is inside the destination {dest}: it would be replaced with the tree",
                         "keep the lock outside --dest (give --lock PATH elsewhere, or run from another folder), "
                         "or use --no-lock")


def _take_guard(dest: Path, log):
    """The per-destination file lock; None where the parent cannot be written (then only an
    already-installed tree can succeed, which needs no write)."""
    from doctor.fetch.guard import take

    parent = dest.parent
    try:
        writes.mkdirs(parent)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and parent.is_dir():
            return None
        raise os_error(exc, "create", parent) from exc
    path = parent / f".{dest.name}.lock"
    try:
        guard = take(path, lambda: log(f"another fetch is installing into {dest}; waiting for it"))
    except OSError as exc:
        # ENOENT in a folder that exists: a virtual file system (/proc) that refuses new files
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) or exc.errno == errno.ENOENT and parent.is_dir():
            return None
        raise os_error(exc, "take the install lock", path) from exc
    if not guard.held:
        log(f"note: the file system holding {parent} gives no file locks (NFS without a lock daemon, some FUSE or "
            f"SMB mounts): installing without the install lock, so run no other fetch into {dest} meanwhile")
    return guard


def _run(host: Host, plan: Plan, opts: FetchOptions, dest: Path, writable: bool, log, progress_stream) -> Outcome:
    from doctor.fetch.lock import lock_entry

    entry = lock_entry(plan.lock_path, plan.lock_key) if plan.lock_path else None
    checked = None if opts.update_lock else entry  # what this fetch must agree with
    record, unusable = examine_record(dest)
    matches, why = record_matches(plan, record, unusable)
    if matches and not marked(dest):
        matches, why = False, UNFINISHED
    installed = matches and not opts.force
    if installed:
        same_kind = _same_kind(record, plan)
        consistent, why = _agrees(record, plan, checked if same_kind else None, same_kind)
        if consistent:
            lock_checked = bool(checked) and same_kind
            if opts.verify_tree:
                verify_tree(dest, record, checked if lock_checked else None, plan.lock_path, log)
            lock_action = "verified" if lock_checked else None
            if plan.lock_path and same_kind and not lock_checked:
                try:
                    lock_action = _record_lock(plan, record)  # an install made without the lock
                except DoctorError as exc:  # the tree is fine; a read-only lock folder is no reason to fail
                    log(f"warning: {exc.message}")
            return Outcome("verified" if opts.verify_tree else "already-installed", dest, record.as_dict(), lock_action)
    if opts.verify_tree and not opts.force:  # verifying reports on what is there: never a download or a replacement
        damaged = record is None and unusable != NO_RECORD
        raise DoctorError(f"nothing to verify at {dest}: {why}",
                          "add --force (without --verify) to reinstall it there: a damaged record vouches for nothing"
                          if damaged else
                          "run without --verify to install the libtorch asked for there (or check --version, --variant)",
                          error_id="fetch.not-installed")
    if opts.offline and plan.source != "archive":
        raise DoctorError(f"libtorch is not installed at {dest} ({why}) and --offline forbids downloading",
                          "run without --offline once, or give --archive FILE", error_id="fetch.offline")
    if not writable:
        raise DoctorError(f"cannot install into {dest}: {dest.parent} is not writable",
                          "choose another --dest (or LIBTORCH_HOME)", error_id="fetch.not-writable")
    replaced = dest.exists() or dest.is_symlink()
    if replaced:
        from doctor.fetch.destination import check_replaceable

        check_replaceable(dest, opts.force)
    # Said once the replacement is allowed: a refusal above must not follow a "replacing" line.
    if installed:
        log(f"reinstalling: {why}")
    elif record is not None and not opts.force and not opts.offline:
        log(f"replacing the libtorch at {dest}: {why}")
    if plan.lock_path is not None and (checked is None):
        _check_lock_writable(plan.lock_path)
    new = _install(host, plan, opts, dest, checked, log, progress_stream)
    lock_action = None
    if plan.lock_path is not None:
        lock_action = "verified" if checked else _record_lock(plan, new)
    return Outcome("installed", dest, new.as_dict(), lock_action, replaced=replaced)


def _install(host: Host, plan: Plan, opts: FetchOptions, dest: Path, entry: dict | None, log,
             progress_stream) -> InstallRecord:
    from doctor.fetch.install import install_archive
    from doctor.fetch.source import get_archive, part_path

    streamed = _stream_into(dest, part_path(plan, dest)) if plan.source == "url" else None
    try:
        archive = get_archive(host, plan, dest, retries=opts.retries, backoff=opts.backoff, timeout=opts.timeout,
                              log=log, progress_stream=progress_stream, sink=streamed)
        try:
            record = install_archive(plan, archive, dest, entry, log, streamed)
        except DoctorError:
            # The transfer was complete; what arrived is wrong (checksum, damaged or unsafe zip,
            # another version or ABI). Never resume from those bytes.
            if archive.part is not None:
                remove_part(archive.part)
            raise
        finally:
            if archive.workdir is not None:
                rmtree(archive.workdir)
    finally:
        if streamed is not None:
            streamed.abandon("the install ended")  # closes what is open; removes what was not swapped in
    if archive.part is not None:
        _keep_or_remove(plan, archive.part, opts.keep_archive, log)
    return record


def _stream_into(dest: Path, part: Path):
    """The unzip a download feeds (stream.py, on its own thread: stream_thread.py), writing
    into a fresh staging folder beside `dest` (named like every staging folder, so a killed
    fetch's is removed by the next); None where no folder can be made (the download then goes
    on alone). Its large entries are read back from `part`, the partial file the download writes."""
    import tempfile

    from doctor.fetch.stream import StreamUnzip
    from doctor.fetch.stream_thread import ThreadedUnzip

    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.staging-", dir=dest.parent))
    except OSError:
        return None
    return ThreadedUnzip(StreamUnzip(staging, reserved=NOT_HASHED, source=part))


def _keep_or_remove(plan: Plan, part: Path, keep: bool, log) -> None:
    """After the install succeeded: the archive kept when asked, else removed. Keeping it is a
    convenience: where it fails, a warning says so and the install stands (its lock entry is
    still recorded), and the partial file and its resume note do not stay behind."""
    if keep:
        # The name comes from the URL: use it only when it is one plain file name.
        kept = part.parent / safe_component(plan.file_name, "libtorch.zip")
        why = None
        if kept.is_symlink() or kept.is_dir():
            why = f"{kept} exists and is not a plain file"
        else:
            try:
                writes.rename_over(part, kept)
            except OSError as exc:
                why = os_error(exc, "keep it at", kept).message
        log(f"warning: did not keep the archive: {why}; the install itself succeeded" if why
            else f"kept the archive at {kept}")
    remove_part(part)


def _same_kind(record: InstallRecord, plan: Plan) -> bool:
    """A wheel-built tree and a zip tree differ, so they answer to different lock entries."""
    return (record.source.get("kind") == "wheel") == (plan.source == "wheel")


def _agrees(record: InstallRecord, plan: Plan, entry: dict | None, same_kind: bool) -> tuple[bool, str]:
    """An installed tree counts as this fetch's result only if its hashes agree with what the
    user promised and what the lock recorded."""
    if plan.sha256 and same_kind and record.sha256 != plan.sha256:
        return False, "the installed archive's sha256 differs from --sha256"
    if entry and entry.get("nar_hash") and record.nar_hash != entry.get("nar_hash"):
        return False, f"the installed tree's NAR hash differs from the lock's ({plan.lock_path})"
    return True, ""


def verify_tree(dest: Path, record: InstallRecord, entry: dict | None, lock_path: Path | None, log) -> None:
    """Re-hash the installed tree; a mismatch speaks of the tree at `dest`, not of an archive.
    With the record's parts, each is checked on an idle CPU; a match ties the tree to the record,
    so the record's NAR hash stands for the tree's against the lock."""
    from doctor.fetch.verify import check_installed, check_parts
    from doctor.nar import nar_digests

    log(f"re-hashing {dest}")
    parts = record.nar_parts
    try:
        whole, actual = nar_digests(dest, NOT_HASHED, whole=parts is None,
                                    part_size=parts["size"] if parts else None)
        if parts:  # inside: naming what differs walks the tree once more
            check_parts(actual, parts, dest, f"its install record {RECORD}", NOT_HASHED)
            whole = record.nar_hash
    except OSError as exc:
        raise os_error(exc, f"read the installed tree at {dest}:", os.fsdecode(exc.filename) if exc.filename else dest) from exc
    except ValueError as exc:  # a FIFO or device inside the tree
        raise DoctorError(f"the installed tree at {dest} holds something that is not a file, directory "
                          f"or symlink: {exc}", "re-install it with --force", error_id="fetch.bad-tree") from exc
    if not parts:
        check_installed(whole, record.nar_hash, dest, f"its install record {RECORD}")
    if entry:
        check_installed(whole, entry.get("nar_hash"), dest, f"the lock file {lock_path}")


def _check_lock_writable(path: Path) -> None:
    """Fail before downloading when the lock cannot be written afterwards."""
    import os

    folder = path.parent if path.parent != Path("") else Path(".")
    target = path if path.exists() else folder
    if not folder.is_dir():  # e.g. the current directory was removed while the shell stayed in it
        raise DoctorError(f"cannot write the lock file {path}: {folder} does not exist",
                          "give --lock PATH in an existing folder, or --no-lock", error_id="lock.not-writable")
    if not os.access(target, os.W_OK) or (not path.exists() and not os.access(folder, os.W_OK | os.X_OK)):
        raise DoctorError(f"cannot write the lock file {path}: {target} is not writable",
                          "give --lock PATH in a writable folder, or --no-lock", error_id="lock.not-writable")


def _record_lock(plan: Plan, record: InstallRecord) -> str:
    from doctor.fetch.lock import read_lock, write_lock_entry

    existed = plan.lock_key in read_lock(plan.lock_path)
    write_lock_entry(plan.lock_path, plan.lock_key, {
        "url": redact_url(record.source.get("url") or record.source.get("url_redacted")),
        "file": record.source.get("file"),
        "size": record.size,
        "sha256": record.sha256,
        "nar_hash": record.nar_hash,
        "source": record.source.get("kind"),
        "recorded_at": record.installed_at,
    })
    return "updated" if existed else "recorded"
