"""Stage 2 of an install: unpack a fetched archive into a staging tree beside the destination,
check it, write the install record and swap it into place.

Every step before the swap happens in `<parent>/.<name>.staging-*`, on the destination's file
system; any failure removes the staging tree and leaves the destination as it was.

A download arrives already unpacked (stream.py, into a staging folder the pipeline owns):
after the sha256 and lock checks, that tree is kept when the central directory agrees with
it (adopt.py); otherwise, and for --archive and wheels, the archive is unpacked from the file.
"""

from __future__ import annotations

import datetime as _dt
import os
import tempfile
from pathlib import Path

from doctor import __version__
from doctor.errors import DoctorError
from doctor.fetch import verify
from doctor.fetch.fsops import ensure_space, os_error, rmtree, swap
from doctor.fetch.names import has_secrets, redact_url, safe_component
from doctor.fetch.plan import Plan
from doctor.fetch.record import NOT_HASHED, InstallRecord, read_install_record, write_record
from doctor.fetch.source import Archive
from doctor.fetch.stream import StreamUnzip
from doctor.fetch.stream_thread import ThreadedUnzip

__all__ = ["install_archive", "read_install_record", "NOT_HASHED"]  # the last two: read by emit nix


def install_archive(plan: Plan, archive: Archive, dest: Path, entry: dict | None, log,
                    streamed: StreamUnzip | ThreadedUnzip | None = None) -> InstallRecord:
    """Check `archive` against --sha256 and the lock `entry`, unpack (or adopt the tree
    `streamed` unpacked while downloading), check the tree, write the record and swap the
    tree in at `dest`. Returns the record written."""
    what = plan.file_name if plan.source == "url" and plan.file_name else archive.path.name
    verify.check_sha256(archive.sha256, plan.sha256, what, "--sha256")
    verify.check_lock_entry(entry, archive.sha256, archive.size, plan.lock_path, plan.lock_key, what)
    staging = None  # a staging folder of this function's own (the streamed one is the caller's)
    try:
        adopted = _adopt(streamed, archive.path, what, log) if streamed is not None else None
        if adopted is not None:
            root, extracted = adopted.root, adopted.extracted
        else:
            try:
                staging = root = Path(tempfile.mkdtemp(prefix=f".{dest.name}.staging-", dir=dest.parent))
            except OSError as exc:
                raise os_error(exc, "create a staging folder in", dest.parent) from exc
            if streamed is None:
                log(f"unpacking {what}")
            try:
                facts, extracted = _unpack(plan, archive.path, staging)
            except OSError as exc:
                raise os_error(exc, "unpack the archive into", dest.parent) from exc
        if entry:
            verify.check_nar(extracted.nar_hash, entry.get("nar_hash"), what, f"{plan.lock_path} [{plan.lock_key}]")
        version, variant, abi, build_version = check_tree(plan, root)
        record = _record(plan, archive, extracted, version, variant, abi, build_version)
        try:
            write_record(root, record)
        except OSError as exc:
            raise os_error(exc, "write the install record in", root) from exc
        swap(root, dest)
        staging = None
        return record
    finally:
        if staging is not None:
            rmtree(staging)


def _adopt(streamed: StreamUnzip | ThreadedUnzip, archive: Path, what: str, log):
    """The tree unpacked while downloading, finished and hashed; None (and the streamed
    folder removed) when the install must unpack from the file."""
    from doctor.fetch.adopt import adopt

    try:
        adopted = adopt(streamed, archive, reserved=NOT_HASHED)
    except OSError as exc:
        raise os_error(exc, "unpack the archive into", streamed.root.parent) from exc
    if isinstance(adopted, str):
        streamed.abandon(adopted)
        log(f"unpacking {what} from the file: the unpack while downloading was not used ({adopted})")
        return None
    log(f"unpacked {what} while downloading")
    return adopted


def _record(plan: Plan, archive: Archive, extracted, version, variant, abi, build_version) -> InstallRecord:
    origin = archive.origin if plan.source != "archive" else None
    source = {"kind": plan.source,
              # A URL holding credentials or a token is not kept: emit nix would publish it.
              "url": None if has_secrets(origin) else origin,
              "file": archive.path.name if plan.source != "url" else plan.file_name}
    if has_secrets(origin):
        source["url_redacted"] = redact_url(origin)
    if plan.source == "archive":
        source["path"] = str(archive.path)
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return InstallRecord(version=version, variant=variant, abi=abi, platform=plan.platform, debug=plan.debug,
                         channel=plan.channel, build_version=build_version, source=source,
                         sha256=archive.sha256, size=archive.size, nar_hash=extracted.nar_hash,
                         strip_root=extracted.stripped, installed_at=now, doctor_version=__version__,
                         nar_parts=extracted.nar_parts)


def _unpack(plan: Plan, archive: Path, staging: Path):
    from doctor.formats import human_bytes
    from doctor.fetch.extract import extract_zip

    def check_space(total: int) -> None:
        ensure_space(staging, total, f"unpack {human_bytes(total)}")

    if plan.source == "wheel":
        import zipfile

        from doctor.fetch import wheel

        try:
            with zipfile.ZipFile(archive) as zf:
                facts = wheel.read_wheel_facts(zf)
        except zipfile.BadZipFile as exc:
            raise DoctorError(f"{archive.name} is not a readable wheel: {exc}",
                              "pip's download is damaged or not a wheel: run the fetch again (pip downloads it "
                              "afresh), or check the index pip uses (--index-url, pip.conf)",
                              error_id="fetch.bad-archive") from exc
        if facts.base_version != plan.version:
            raise DoctorError(f"pip downloaded torch {facts.version}, not {plan.version}",
                              f"check --version, and that the index pip uses (--index-url, pip.conf) serves "
                              f"torch=={plan.version}", error_id="fetch.wrong-build")
        if facts.variant != plan.variant:
            raise DoctorError(
                f"pip downloaded torch {facts.version} (variant {facts.variant}), not the {plan.variant} variant",
                f"point pip at PyTorch's index: --index-url https://download.pytorch.org/whl/{plan.variant}",
                error_id="fetch.wrong-build",
            )
        extracted = extract_zip(archive, staging, strip_root=False, rename=wheel.tree_name,
                                extra=wheel.extra_files(facts), check_space=check_space, reserved=NOT_HASHED)
        return facts, extracted
    return None, extract_zip(archive, staging, strip_root=True, check_space=check_space, reserved=NOT_HASHED)


def check_tree(plan: Plan, root: Path) -> tuple[str | None, str, str | None, str | None]:
    """What the unpacked tree says about itself, checked against what was asked for."""
    from doctor.fetch.wheel import abi_from_config
    from doctor.probe.versions import split_local

    if not (root / "lib").is_dir() or not (root / "include").is_dir():
        raise DoctorError("the archive does not unpack to a libtorch tree (no lib/ and include/ at its top)",
                          "check the URL or file: it should be an official libtorch zip", error_id="fetch.bad-archive")
    build_version = _small_text(root / "build-version")
    version, variant = plan.version, plan.variant
    if build_version:
        base, local = split_local(build_version)
        if plan.version is not None and base != plan.version:
            raise DoctorError(f"the archive holds libtorch {_shown(build_version)} (its build-version), not {plan.version}",
                              "check --version, or the URL/mirror serving this file", error_id="fetch.wrong-build")
        if local and local != plan.variant:
            raise DoctorError(f"the archive holds libtorch {_shown(build_version)}, not the {plan.variant} variant",
                              "check --variant, or the URL/mirror serving this file", error_id="fetch.wrong-build")
        if plan.version is None:
            from doctor.catalog.releases import VERSION_RE

            if not VERSION_RE.match(base):
                raise DoctorError(f"the archive's build-version {_shown(build_version)} is not a libtorch version",
                                  "check the URL or file", error_id="fetch.bad-archive")
        version = version or base
    abi = plan.abi
    if plan.platform.startswith("linux"):
        config = _small_text(root / "share/cmake/Torch/TorchConfig.cmake", limit=4 << 20)
        said = abi_from_config(config) if config else None
        if said and plan.abi and said != plan.abi:
            raise DoctorError(f"the archive is a {said} ABI build (TorchConfig.cmake), not {plan.abi}",
                              "check --abi, or the URL/file", error_id="fetch.wrong-build")
        abi = said or plan.abi
    if variant is not None and safe_component(variant, "") != variant:
        raise DoctorError(f"variant {variant!r} is not a plain name",
                          "give --variant as one plain name (cpu, cuXYZ, rocmX.Y)", error_id="fetch.bad-archive")
    return version, variant, abi, build_version


def _shown(text: str) -> str:
    """Text from the archive, fit for one message line."""
    return text if text.isprintable() and len(text) <= 80 else repr(text[:80])


def _small_text(path: Path, limit: int = 4096) -> str | None:
    """A small text file of the tree (bounded; never a FIFO or a symlink out of the tree)."""
    import stat

    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace").strip() or None
    except OSError:
        return None
