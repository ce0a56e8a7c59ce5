"""Stream a URL into a partial file beside the destination, hashing as it arrives.

- sha256 is computed while streaming (the archive is never read twice);
- a dropped connection resumes with `Range: bytes=N-` (guarded by `If-Range`), also across
  runs: the partial file and a small sidecar with the URL and ETag stay until the install
  succeeds;
- 5xx, 408, 429 and connection errors are retried with exponential backoff; other 4xx
  (404 above all) fail at once;
- plain HTTP (including a redirect down to it) is refused unless allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from doctor import __version__
from doctor.diagnose.common import human_bytes
from doctor.errors import DoctorError

CHUNK = 1 << 20  # reading a partial file back
NET_CHUNK = 256 << 10  # one network read; what a dropped connection can cost at most
RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass
class Downloaded:
    path: Path
    sha256: str
    size: int
    url: str  # after redirects
    attempts: int
    resumed_at: list[int]  # offsets a transfer resumed from
    seconds: float


class Progress(Protocol):
    def start(self, total: int | None, done: int) -> None: ...
    def advance(self, n: int) -> None: ...
    def close(self) -> None: ...


class _Retry(Exception):
    def __init__(self, why: str, wait: float | None = None) -> None:
        super().__init__(why)
        self.wait = wait


def download(
    url: str,
    part: Path,
    *,
    allow_http: bool = False,
    retries: int = 5,
    backoff: float = 1.0,
    timeout: tuple[float, float] = (15.0, 60.0),
    log: Callable[[str], None] = lambda s: None,
    progress: Progress | None = None,
    check_space: Callable[[int], None] | None = None,
) -> Downloaded:
    """Download `url` to `part` (resuming what a previous run left there) and return its sha256."""
    import requests

    started = time.monotonic()
    sidecar = part.with_name(part.name + ".json")
    meta = _read_sidecar(sidecar)
    st = _State(part)
    if part.exists() and meta.get("url") == url:
        st.hash_existing()
        if st.offset:
            log(f"resuming a partial download ({human_bytes(st.offset)} already here)")
    else:
        part.unlink(missing_ok=True)
        meta = {"url": url}

    session = requests.Session()
    session.headers["User-Agent"] = f"torch-doctor/{__version__}"
    session.headers["Accept-Encoding"] = "identity"  # bytes as stored: the sha256 is of the file
    failures = attempts = 0
    resumed_at: list[int] = []
    final_url = url
    total: int | None = meta.get("total")
    space_checked = False
    try:
        while True:
            attempts += 1
            progress_before = st.offset
            try:
                headers = {}
                if st.offset:
                    headers["Range"] = f"bytes={st.offset}-"
                    validator = meta.get("etag") or meta.get("last_modified")
                    if validator:
                        headers["If-Range"] = validator
                    resumed_at.append(st.offset)
                try:
                    resp = session.get(url, headers=headers, stream=True, timeout=timeout)
                except requests.exceptions.SSLError as exc:
                    raise DoctorError(f"TLS error talking to {_host(url)}: {exc}",
                                      "check the system's CA certificates or a proxy intercepting HTTPS") from exc
                except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                    raise _Retry(f"connection failed: {_short(exc)}") from exc
                with resp:
                    final_url = resp.url or url
                    if urlsplit(final_url).scheme != "https" and not allow_http:
                        raise DoctorError(f"refusing plain HTTP: {final_url}" + (f" (redirected from {url})" if final_url != url else ""),
                                          "use --allow-http only for a mirror you trust")
                    status = resp.status_code
                    if status in RETRY_STATUS:
                        raise _Retry(f"HTTP {status} from {_host(final_url)}", _retry_after(resp))
                    if status == 416 and st.offset:
                        if total is not None and st.offset == total:
                            break  # everything is already here
                        log("the server refused to resume; starting over")
                        st.restart()
                        continue
                    if status in (404, 410):
                        raise DoctorError(f"not found (HTTP {status}): {final_url}",
                                          "the catalog may be out of date or the file was removed; "
                                          "check --version/--variant, or give --url or --mirror")
                    if status >= 400:
                        raise DoctorError(f"HTTP {status} {resp.reason or ''} from {final_url}".rstrip())
                    if status == 206 and st.offset:
                        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
                        if not m or int(m.group(1)) != st.offset:
                            log("the server answered a different range; starting over")
                            st.restart()
                            continue
                        if m.group(3) != "*":
                            total = int(m.group(3))
                    else:
                        if st.offset:
                            log("the file changed on the server (or it cannot resume); starting over")
                            st.restart()
                        length = resp.headers.get("Content-Length")
                        total = int(length) if length and length.isdigit() else None
                    meta.update(url=url, total=total, etag=resp.headers.get("ETag"),
                                last_modified=resp.headers.get("Last-Modified"))
                    _write_sidecar(sidecar, meta)
                    if check_space is not None and not space_checked and total is not None:
                        check_space(total - st.offset)
                        space_checked = True
                    if progress is not None:
                        progress.start(total, st.offset)
                    st.stream(resp, progress)
                    if total is not None and st.offset < total:
                        raise _Retry(f"connection closed after {human_bytes(st.offset)} of {human_bytes(total)}")
                    if total is not None and st.offset > total:
                        raise DoctorError(f"the server sent {st.offset} bytes, more than the {total} it announced")
                    break
            except _Retry as retry:
                failures = 0 if st.offset > progress_before else failures + 1
                if failures > retries:
                    raise DoctorError(f"download failed after {attempts} attempts: {retry}",
                                      "run the same command again to resume, or try --mirror") from None
                wait = retry.wait if retry.wait is not None else backoff * (2 ** max(failures - 1, 0))
                wait = min(wait, 30.0)
                log(f"{retry}; retrying in {wait:.1f} s" + (f" from {human_bytes(st.offset)}" if st.offset else ""))
                time.sleep(wait)
    finally:
        if progress is not None:
            progress.close()
    return Downloaded(part, st.hasher.hexdigest(), st.offset, final_url, attempts, resumed_at, time.monotonic() - started)


class _State:
    """The partial file's length and the running sha256 of its bytes."""

    def __init__(self, part: Path) -> None:
        self.part = part
        self.offset = 0
        self.hasher = hashlib.sha256()

    def restart(self) -> None:
        self.part.unlink(missing_ok=True)
        self.offset = 0
        self.hasher = hashlib.sha256()

    def hash_existing(self) -> None:
        with open(self.part, "rb") as fh:
            while chunk := fh.read(CHUNK):
                self.hasher.update(chunk)
                self.offset += len(chunk)

    def stream(self, resp, progress: Progress | None) -> None:
        import requests

        # urllib3 discards the bytes of a read that ends in IncompleteRead; we count the
        # length ourselves (offset vs total), so let it hand over what arrived.
        if hasattr(resp.raw, "enforce_content_length"):
            resp.raw.enforce_content_length = False
        with open(self.part, "r+b" if self.offset else "wb") as fh:
            fh.seek(self.offset)
            fh.truncate()
            try:
                for chunk in resp.iter_content(NET_CHUNK):
                    fh.write(chunk)
                    self.hasher.update(chunk)
                    self.offset += len(chunk)
                    if progress is not None:
                        progress.advance(len(chunk))
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError,
                    requests.exceptions.Timeout, requests.exceptions.ContentDecodingError) as exc:
                raise _Retry(f"transfer interrupted after {human_bytes(self.offset)}: {_short(exc)}") from exc


def _read_sidecar(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_sidecar(path: Path, meta: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, path)


def _retry_after(resp) -> float | None:
    value = resp.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 160 else text[:157] + "..."


# -- progress: a bar on a terminal, a few log lines elsewhere --


class LogProgress:
    """For CI logs: a line at each quarter, no carriage returns."""

    def __init__(self, label: str, write: Callable[[str], None]) -> None:
        self.label, self.write = label, write
        self.total: int | None = None
        self.done = 0
        self.next_mark = 0.25
        self.t0 = time.monotonic()

    def start(self, total: int | None, done: int) -> None:
        self.total, self.done = total, done
        size = human_bytes(total) if total else "unknown size"
        self.write(f"downloading {self.label} ({size})" + (f", resuming at {human_bytes(done)}" if done else ""))
        self.next_mark = (int(done / total * 4) + 1) / 4 if total else 1.0

    def advance(self, n: int) -> None:
        self.done += n
        if self.total and self.done / self.total >= self.next_mark and self.next_mark < 1.0:
            rate = self.done / max(time.monotonic() - self.t0, 1e-6)
            self.write(f"  {self.next_mark:.0%} of {human_bytes(self.total)} ({human_bytes(rate)}/s)")
            self.next_mark += 0.25

    def close(self) -> None:
        pass


class RichProgress:
    def __init__(self, label: str) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                  TransferSpeedColumn(), TimeRemainingColumn(),
                                  console=Console(stderr=True), transient=False)
        # the bar, size, speed and ETA need ~50 columns; keep the name from pushing them to a second line
        self._label = label if len(label) <= 28 else label[:27] + "…"
        self._task = None

    def start(self, total: int | None, done: int) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(self._label, total=total, completed=done)
        else:
            self._progress.update(self._task, total=total, completed=done)

    def advance(self, n: int) -> None:
        self._progress.update(self._task, advance=n)

    def close(self) -> None:
        if self._task is not None:
            self._progress.stop()


def make_progress(label: str, write: Callable[[str], None], stream=None) -> Progress:
    stream = stream or sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return RichProgress(label) if tty else LogProgress(label, write)
