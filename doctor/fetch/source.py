"""Stage 1 of an install: get the archive onto the disk beside the destination, with its sha256.

Three sources: a URL (downloaded into `<parent>/.<name>.<id>.part`, resumable across runs),
a local `--archive` (hashed where it lies), or a torch wheel (`pip download` into a work folder).
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from doctor.fetch.fsops import ensure_space, file_size, os_error, rmtree, sha256_file
from doctor.fetch.names import redact_url
from doctor.fetch.plan import Plan
from doctor.host import Host
from doctor.record import record

# Room for the unpacked tree while the archive is still on disk: libtorch zips unpack to
# 2-4× their size. The exact figure is checked again before unpacking.
UNPACK_FACTOR = 3


@record
class Archive:
    path: Path
    sha256: str
    size: int
    origin: str | None  # the URL it came from (secrets included: never stored or printed as is)
    part: Path | None = None  # the partial download, removed or kept once installed
    workdir: Path | None = None  # a pip work folder to remove after unpacking


def part_path(plan: Plan, dest: Path) -> Path:
    return dest.parent / f".{dest.name}.{hashlib.sha256((plan.url or '').encode()).hexdigest()[:12]}.part"


def get_archive(host: Host, plan: Plan, dest: Path, *, retries: int, backoff: float, timeout: float,
                log, progress_stream, sink=None) -> Archive:
    """`sink`: fed the bytes of a download as they arrive (stream.py), for URLs only."""
    if plan.source == "url":
        return _download(plan, dest, retries, backoff, timeout, log, progress_stream, sink)
    if plan.source == "archive":
        path = Path(host.real(plan.archive))
        log(f"hashing {path}")
        sha, size = sha256_file(path)
        return Archive(path, sha, size, None)
    from doctor.catalog.releases import host_platform
    from doctor.fetch.wheel import pip_download

    try:
        workdir = Path(tempfile.mkdtemp(prefix=f".{dest.name}.wheel-", dir=dest.parent))
    except OSError as exc:
        raise os_error(exc, "create a work folder in", dest.parent) from exc
    try:
        path, origin = pip_download(host, plan.version, plan.variant, plan.platform,
                                    host_platform(host.system, host.machine), workdir, plan.index_url, log)
        sha, size = sha256_file(path)
    except BaseException:  # the caller removes the work folder only once it holds the Archive
        rmtree(workdir)
        raise
    return Archive(path, sha, size, origin, workdir=workdir)


def _download(plan: Plan, dest: Path, retries: int, backoff: float, timeout: float, log, progress_stream,
              sink) -> Archive:
    from doctor.formats import human_bytes
    from doctor.fetch.download import download, make_progress

    part = part_path(plan, dest)
    log(f"fetching {redact_url(plan.url)}")

    def check_space(remaining: int) -> None:
        need = remaining + UNPACK_FACTOR * (remaining + file_size(part))
        ensure_space(part.parent, need, f"download {human_bytes(remaining)} and unpack it")

    result = download(plan.url, part, allow_http=plan.allow_http, retries=retries, backoff=backoff,
                      timeout=(min(15.0, timeout), timeout), log=log,
                      progress=make_progress(plan.file_name or "libtorch", log, progress_stream),
                      check_space=check_space, sink=sink)
    log(f"downloaded {human_bytes(result.size)} in {result.seconds:.1f} s; sha256 {result.sha256}")
    return Archive(result.path, result.sha256, result.size, plan.url, part=part)
