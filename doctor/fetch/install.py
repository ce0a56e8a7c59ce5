"""Put a fetched libtorch in place: one fetch at a time per destination, verified, atomic.

Order of work (every step before the swap happens beside the destination, on its file system):

1. take `<parent>/.<name>.lock` (filelock) — a second fetch waits, then finds the work done;
2. if the destination already holds this libtorch (install record matches; lock agrees),
   stop: nothing to do;
3. get the archive: download into `<parent>/.<name>.<id>.part` (resumable across runs),
   or hash a local `--archive`, or `pip download` a wheel;
4. check sha256 against --sha256 and the lock; unpack into `<parent>/.<name>.staging-*`
   computing the NAR hash in the same pass; check it against the lock; check the tree
   says the version, variant and ABI asked for;
5. write the install record (`torch-doctor.json`) and Hasktorch's `.ok` into the staging tree,
   then swap it into place with one rename (RENAME_EXCHANGE on Linux when replacing);
6. record the hashes in the lock on first use.

Any failure before 5 leaves the destination as it was and removes the staging tree.

The install record's `nar_hash` is the NAR hash of the tree exactly as unpacked — every entry
of the destination except the two files this step adds at its top, `torch-doctor.json` and
`.ok`. For a zip that is the hash Nix's `fetchzip { url; }` (stripRoot = true) computes for
the same URL, so `doctor emit nix` can write it as the fetchzip `hash`.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from doctor import __version__
from doctor.errors import DoctorError
from doctor.fetch.plan import Plan
from doctor.host import Host

RECORD = "torch-doctor.json"
MARKER = ".ok"  # Hasktorch's "this cache entry is complete" marker
NOT_HASHED = (RECORD, MARKER)
RECORD_VERSION = 1
# Room for the unpacked tree while the archive is still on disk: libtorch zips unpack to
# 2-4× their size. The exact figure is checked again before unpacking.
UNPACK_FACTOR = 3


@dataclass
class FetchOptions:
    force: bool = False  # fetch and replace even when installed
    verify_tree: bool = False  # re-hash an installed tree instead of trusting its record
    offline: bool = False  # never download: succeed only when already installed
    update_lock: bool = False  # re-record the lock entry instead of checking it
    keep_archive: bool = False
    retries: int = 5
    backoff: float = 1.0
    timeout: float = 60.0


@dataclass
class Outcome:
    action: str  # "installed" | "already-installed" | "verified"
    dest: Path
    record: dict
    lock: str | None = None  # "recorded" | "verified" | "updated" | None (no lock)
    replaced: bool = False
    seconds: float = 0.0


def read_install_record(root: str | os.PathLike[str]) -> dict | None:
    """The install record fetch-libtorch wrote at `root`, or None (absent or unreadable)."""
    try:
        data = json.loads((Path(root) / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_matches(plan: Plan, record: dict | None) -> tuple[bool, str]:
    """Whether `record` describes the libtorch `plan` asks for (and why not)."""
    if record is None:
        return False, "no install record"
    wanted = {"variant": plan.variant, "platform": plan.platform, "abi": plan.abi,
              "debug": plan.debug}
    if plan.version is not None:
        wanted["version"] = plan.version
    else:
        wanted["channel"] = "nightly"
    for k, v in wanted.items():
        if record.get(k, False if k == "debug" else None) != v:
            return False, f"the installed {k} is {record.get(k)!r}, not {v!r}"
    return True, ""


def fetch(host: Host, plan: Plan, opts: FetchOptions, log: Callable[[str], None],
          progress_stream=None) -> Outcome:
    import time

    from filelock import FileLock, Timeout

    from doctor.fetch import verify
    from doctor.fetch.lock import lock_entry

    started = time.monotonic()
    dest = Path(host.real(plan.dest))
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DoctorError(f"cannot create {parent}: {exc.strerror or exc}", "choose another --dest") from exc
    guard = FileLock(str(parent / f".{dest.name}.lock"))
    try:
        guard.acquire(timeout=0.05)
    except Timeout:
        log(f"another fetch is installing into {dest}; waiting for it")
        guard.acquire()
    try:
        _cleanup_leftovers(parent, dest.name)
        entry = lock_entry(plan.lock_path, plan.lock_key) if plan.lock_path else None
        checked = None if opts.update_lock else entry  # what this fetch must agree with
        record = read_install_record(dest)
        matches, why = record_matches(plan, record)
        if matches and (dest / MARKER).exists() and not opts.force:
            same_kind = _same_kind(record, plan)
            consistent, why = _agrees(record, plan, checked if same_kind else None, same_kind)
            if consistent:
                lock_checked = bool(checked) and same_kind
                if opts.verify_tree:
                    _verify_tree(dest, record, checked if lock_checked else None, log)
                lock_action = "verified" if lock_checked else None
                if plan.lock_path and same_kind and not lock_checked:
                    lock_action = _record_lock(plan, record)  # an install made without the lock
                return Outcome("verified" if opts.verify_tree else "already-installed", dest, record,
                               lock_action, seconds=time.monotonic() - started)
            log(f"reinstalling: {why}")
        elif record is not None and not opts.force and not opts.offline:
            log(f"replacing the libtorch at {dest}: {why}")
        if opts.offline:
            raise DoctorError(f"libtorch is not installed at {dest} ({why}) and --offline forbids downloading",
                              "run without --offline (or -s) once, or give --archive")
        replaced = dest.exists()
        if replaced:
            _refuse_foreign(dest)
        outcome = _install(host, plan, opts, dest, checked, log, progress_stream, verify)
        outcome.replaced = replaced
        outcome.seconds = time.monotonic() - started
        return outcome
    finally:
        guard.release()


def _same_kind(record: dict, plan: Plan) -> bool:
    """A wheel-built tree and a zip tree differ, so they answer to different lock entries."""
    return ((record.get("source") or {}).get("kind") == "wheel") == (plan.source == "wheel")


def _agrees(record: dict, plan: Plan, entry: dict | None, same_kind: bool) -> tuple[bool, str]:
    """An installed tree counts as this fetch's result only if its hashes agree with what the
    user promised and what the lock recorded."""
    if plan.sha256 and same_kind and record.get("sha256") != plan.sha256:
        return False, "the installed archive's sha256 differs from --sha256"
    if entry and entry.get("nar_hash") and record.get("nar_hash") != entry.get("nar_hash"):
        return False, f"the installed tree's NAR hash differs from the lock's ({plan.lock_path})"
    return True, ""


def _verify_tree(dest: Path, record: dict, entry: dict | None, log) -> None:
    from doctor.fetch.verify import check_nar
    from doctor.nar import nar_hash

    log(f"re-hashing {dest}")
    actual = nar_hash(dest, exclude_top=NOT_HASHED)
    check_nar(actual, record.get("nar_hash"), f"tree at {dest}", f"its install record {RECORD}")
    if entry:
        check_nar(actual, entry.get("nar_hash"), f"tree at {dest}", "the lock file")


def _refuse_foreign(dest: Path) -> None:
    """Replace only what is empty or is a libtorch: never a directory the user cares about."""
    if dest.is_symlink() or not dest.is_dir():
        raise DoctorError(f"{dest} exists and is not a directory (or is a symlink)", "choose another --dest")
    names = set(os.listdir(dest))
    if not names or names & {RECORD, MARKER, "build-version"} or {"lib", "include"} <= names:
        return
    raise DoctorError(f"{dest} exists and does not look like a libtorch install; refusing to replace it",
                      "choose another --dest, or remove that directory yourself")


def _install(host: Host, plan: Plan, opts: FetchOptions, dest: Path, entry: dict | None, log,
             progress_stream, verify) -> Outcome:
    parent = dest.parent
    workdir = None
    archive: Path
    part: Path | None = None
    if plan.source == "url":
        part = parent / f".{dest.name}.{hashlib.sha256(plan.url.encode()).hexdigest()[:12]}.part"
        archive, sha, size, origin = _download(plan, opts, part, log, progress_stream)
    elif plan.source == "archive":
        archive = Path(host.real(plan.archive))
        log(f"hashing {archive}")
        sha, size = _sha256_file(archive)
        origin = None
    else:
        from doctor.catalog.releases import host_platform
        from doctor.fetch.wheel import pip_download

        workdir = Path(tempfile.mkdtemp(prefix=f".{dest.name}.wheel-", dir=parent))
        archive, origin = pip_download(host, plan.version, plan.platform,
                                       host_platform(host.system, host.machine), workdir, plan.index_url, log)
        sha, size = _sha256_file(archive)

    staging = None
    try:
        what = plan.file_name if plan.source == "url" and plan.file_name else archive.name
        verify.check_sha256(sha, plan.sha256, what, "--sha256")
        verify.check_lock_entry(entry, sha, size, plan.lock_path, plan.lock_key, what)
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.staging-", dir=parent))
        log(f"unpacking {what}")
        facts, extracted = _unpack(plan, archive, staging, log)
        if entry:
            verify.check_nar(extracted.nar_hash, entry.get("nar_hash"), what, f"{plan.lock_path} [{plan.lock_key}]")
        version, variant, abi, build_version = _check_tree(plan, staging, facts)
        record = {
            "record_version": RECORD_VERSION,
            "version": version,
            "variant": variant,
            "abi": abi,
            "platform": plan.platform,
            "debug": plan.debug,
            "channel": plan.channel,
            "build_version": build_version,
            "source": {"kind": plan.source, "url": origin if plan.source != "archive" else None,
                       "file": archive.name if plan.source != "url" else plan.file_name},
            "sha256": sha,
            "size": size,
            "nar_hash": extracted.nar_hash,
            "nar_excludes": list(NOT_HASHED),
            "strip_root": extracted.stripped,
            "installed_at": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
            "doctor_version": __version__,
        }
        if plan.source == "archive":
            record["source"]["path"] = str(archive)
        (staging / RECORD).write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
        (staging / MARKER).write_text("")
        _swap(staging, dest)
        staging = None
    except DoctorError:
        # The transfer was complete; what arrived is wrong (checksum, damaged or unsafe zip,
        # another version or ABI). Never resume from those bytes.
        if part is not None:
            _remove_part(part)
        raise
    finally:
        if staging is not None:
            rmtree(staging)
        if workdir is not None:
            rmtree(workdir)

    if part is not None and not opts.keep_archive:
        _remove_part(part)
    elif part is not None:
        kept = parent / (plan.file_name or part.name)
        os.replace(part, kept)
        part.with_name(part.name + ".json").unlink(missing_ok=True)
        log(f"kept the archive at {kept}")
    lock_action = None
    if plan.lock_path is not None:
        lock_action = "verified" if entry else _record_lock(plan, record)
    return Outcome("installed", dest, record, lock_action)


def _download(plan: Plan, opts: FetchOptions, part: Path, log, progress_stream):
    from doctor.diagnose.common import human_bytes
    from doctor.fetch.download import download, make_progress

    log(f"fetching {plan.url}")

    def check_space(remaining: int) -> None:
        need = remaining + UNPACK_FACTOR * (remaining + _size(part))
        ensure_space(part.parent, need, f"download {human_bytes(remaining)} and unpack it")

    result = download(plan.url, part, allow_http=plan.allow_http, retries=opts.retries, backoff=opts.backoff,
                      timeout=(min(15.0, opts.timeout), opts.timeout), log=log,
                      progress=make_progress(plan.file_name or "libtorch", log, progress_stream),
                      check_space=check_space)
    log(f"downloaded {human_bytes(result.size)} in {result.seconds:.1f} s; sha256 {result.sha256}")
    return result.path, result.sha256, result.size, plan.url


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def _unpack(plan: Plan, archive: Path, staging: Path, log):
    from doctor.diagnose.common import human_bytes
    from doctor.fetch.extract import extract_zip

    def check_space(total: int) -> None:
        ensure_space(staging, total, f"unpack {human_bytes(total)}")

    if plan.source == "wheel":
        import zipfile

        from doctor.fetch import wheel

        with zipfile.ZipFile(archive) as zf:
            facts = wheel.read_wheel_facts(zf)
        if facts.base_version != plan.version:
            raise DoctorError(f"pip downloaded torch {facts.version}, not {plan.version}")
        if facts.variant != plan.variant:
            raise DoctorError(
                f"pip downloaded torch {facts.version} (variant {facts.variant}), not the {plan.variant} variant",
                f"point pip at PyTorch's index: --index-url https://download.pytorch.org/whl/{plan.variant}",
            )
        extracted = extract_zip(archive, staging, strip_root=False, rename=wheel.tree_name,
                                extra=wheel.extra_files(facts), check_space=check_space)
        return facts, extracted
    return None, extract_zip(archive, staging, strip_root=True, check_space=check_space)


def _check_tree(plan: Plan, root: Path, facts) -> tuple[str, str, str | None, str | None]:
    """What the unpacked tree says about itself, checked against what was asked for."""
    from doctor.fetch.wheel import abi_from_config
    from doctor.probe.versions import split_local

    if not (root / "lib").is_dir() or not (root / "include").is_dir():
        raise DoctorError("the archive does not unpack to a libtorch tree (no lib/ and include/ at its top)",
                          "check the URL or file: it should be an official libtorch zip")
    build_version = None
    try:
        build_version = (root / "build-version").read_text().strip() or None
    except OSError:
        pass
    version, variant = plan.version, plan.variant
    if build_version:
        base, local = split_local(build_version)
        if plan.version is not None and base != plan.version:
            raise DoctorError(f"the archive holds libtorch {build_version} (its build-version), not {plan.version}",
                              "check --version, or the URL/mirror serving this file")
        if local and local != plan.variant:
            raise DoctorError(f"the archive holds libtorch {build_version}, not the {plan.variant} variant",
                              "check --variant, or the URL/mirror serving this file")
        version = version or base
    abi = plan.abi
    if plan.platform.startswith("linux"):
        try:
            said = abi_from_config((root / "share/cmake/Torch/TorchConfig.cmake").read_text(errors="replace"))
        except OSError:
            said = None
        if said and plan.abi and said != plan.abi:
            raise DoctorError(f"the archive is a {said} ABI build (TorchConfig.cmake), not {plan.abi}",
                              "check --abi, or the URL/file")
        abi = said or plan.abi
    return version, variant, abi, build_version


def _record_lock(plan: Plan, record: dict) -> str:
    from doctor.fetch.lock import read_lock, write_lock_entry

    existed = plan.lock_key in read_lock(plan.lock_path)
    write_lock_entry(plan.lock_path, plan.lock_key, {
        "url": record["source"].get("url"),
        "file": record["source"].get("file"),
        "size": record["size"],
        "sha256": record["sha256"],
        "nar_hash": record["nar_hash"],
        "source": record["source"].get("kind"),
        "recorded_at": record["installed_at"],
    })
    return "updated" if existed else "recorded"


# -- file-system helpers --


def ensure_space(path: Path, need: int, what: str) -> None:
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return
    message = space_error(need, free, path, what)
    if message:
        raise DoctorError(message, "free some space, or choose another --dest (or LIBTORCH_HOME)")


def space_error(need: int, free: int, path: Path, what: str) -> str | None:
    from doctor.diagnose.common import human_bytes

    if need > free:
        return f"not enough free space in {path} to {what}: need about {human_bytes(need)}, {human_bytes(free)} free"
    return None


def _sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
    except OSError as exc:
        raise DoctorError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return h.hexdigest(), n


def _remove_part(part: Path) -> None:
    part.unlink(missing_ok=True)
    part.with_name(part.name + ".json").unlink(missing_ok=True)


def _cleanup_leftovers(parent: Path, name: str) -> None:
    """Staging trees of a fetch that was killed: only the lock holder creates them, so any
    seen while holding the lock are dead."""
    for prefix in (f".{name}.staging-", f".{name}.old-", f".{name}.wheel-"):
        for p in parent.glob(prefix + "*"):
            rmtree(p)


def _swap(staging: Path, dest: Path) -> None:
    """Put `staging` at `dest` in one step; the old tree (if any) goes away after."""
    if not dest.exists() and not dest.is_symlink():
        os.rename(staging, dest)
        return
    if _exchange(staging, dest):
        rmtree(staging)  # now holds the old tree
        return
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    os.rmdir(old)
    os.rename(dest, old)
    os.rename(staging, dest)
    rmtree(old)


def _exchange(a: Path, b: Path) -> bool:
    """renameat2(RENAME_EXCHANGE): swap two paths atomically (Linux ≥ 3.15, glibc ≥ 2.28)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def rmtree(path: Path) -> None:
    """Remove a tree even where the archive made directories read-only."""

    def fix(func, p, exc_info=None):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    if not os.path.lexists(path):
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=fix)
    else:
        shutil.rmtree(path, onerror=fix)
