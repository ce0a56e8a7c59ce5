"""Stream a URL into a partial file beside the destination, hashing as it arrives.

- sha256 is computed while streaming (the archive is never read twice);
- a dropped connection resumes with `Range: bytes=N-` (guarded by `If-Range`), also across
  runs: the partial file and a small sidecar with the URL and ETag stay until the install
  succeeds;
- 5xx, 408, 429 and connection errors are retried with exponential backoff; other 4xx
  (404 above all) fail at once;
- plain HTTP is refused unless allowed, and a redirect from https down to http always:
  redirects are followed one at a time and each Location is checked before it is requested;
  loops and chains over 10 hops end with a clear error;
- `Accept-Encoding: identity` is sent; a server that compresses anyway is decoded (and that
  answer is not resumed byte for byte);
- URLs are shown with credentials and query strings redacted (names.py);
- a `sink` (stream.py's unzip) is fed every byte written to the partial file, in order, as
  long as it has seen all of them: a partial file from an earlier run, a restart from zero or
  a body the server compressed anyway ends its part (`abandon`), and the install unpacks
  from the file instead.

The loop is small steps in the manner of pip's network/download.py: resume-or-start, one
attempt (request → status check → remember validators → stream), wait-and-retry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Protocol
from urllib.parse import urlsplit

from doctor import __version__
from doctor.formats import human_bytes
from doctor.errors import DoctorError
from doctor.fetch.names import host_problem, redact_secrets, redact_url
from doctor.record import record

CHUNK = 1 << 20  # reading a partial file back
NET_CHUNK = 256 << 10  # the most one network read returns (it returns what has arrived, never waits for more)
RETRY_STATUS = {408, 429, 500, 502, 503, 504}
# From this size, the central directory is read before the body (directory.py): ~100 ms of
# round trips against seconds of file creation; a smaller archive unpacks as it arrives.
DIRECTORY_FIRST = 32 << 20
# Numbers of at most 19 digits: no file is larger, and int() of thousands of digits fails.
_CONTENT_RANGE = re.compile(r"bytes ([0-9]{1,19})-([0-9]{1,19})/([0-9]{1,19}|\*)")
# A byte count or a number of seconds from a header: ASCII digits only (str.isdigit() takes '²',
# which int() refuses), and few enough of them for any real file or wait.
_COUNT = re.compile(r"[0-9]{1,19}")


@record
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


class Sink(Protocol):
    position: int  # bytes fed so far

    def feed(self, data: bytes) -> None: ...
    def abandon(self, why: str) -> None: ...


class _Retry(Exception):
    def __init__(self, why: str, wait: float | None = None) -> None:
        super().__init__(why)
        self.wait = wait


class _Restart(_Retry):
    """The partial file was dropped and the next request starts from byte 0, at once. It counts
    as a failure: a server that drops every body and refuses every resume would loop forever."""


MAX_REDIRECTS = 10


@record
class _Attempt:
    """What one request needs and what it learned: the state shared by the steps below."""

    url: str
    part: Path
    sidecar: Path
    meta: dict
    allow_http: bool
    timeout: tuple[float, float]
    log: Callable[[str], None]
    total: int | None = None
    final_url: str = ""
    space_checked: bool = False


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
    sink: Sink | None = None,
) -> Downloaded:
    """Download `url` to `part` (resuming what a previous run left there) and return its sha256."""
    started = time.monotonic()
    st = _State(part, sink)
    at = _Attempt(url, part, part.with_name(part.name + ".json"), {}, allow_http, timeout, log)
    _resume_or_start(at, st)
    session = _session()
    failures = attempts = 0
    furthest = st.offset  # progress is a byte never had before: a restart that gets as far again is not
    resumed_at: list[int] = []
    try:
        while True:
            attempts += 1
            if st.offset:
                resumed_at.append(st.offset)
            try:
                if _attempt(session, at, st, progress, check_space):
                    break
            except _Retry as retry:
                failures = 0 if st.offset > furthest else failures + 1
                furthest = max(furthest, st.offset)
                if failures > retries:
                    raise DoctorError(f"download failed after {attempts} attempts: {retry}",
                                      "run the same command again to resume, or try --mirror", error_id="fetch.download-failed") from None
                if not isinstance(retry, _Restart):
                    _wait(retry, failures, backoff, st.offset, log)
    finally:
        session.close()
        if progress is not None:
            progress.close()
    return Downloaded(part, st.hasher.hexdigest(), st.offset, at.final_url or url, attempts, resumed_at,
                      time.monotonic() - started)


def _session():
    import requests

    session = requests.Session()
    session.headers["User-Agent"] = f"torch-doctor/{__version__}"
    session.headers["Accept-Encoding"] = "identity"  # bytes as stored: the sha256 is of the file
    session.trust_env = True
    return session


def _resume_or_start(at: _Attempt, st: _State) -> None:
    """Pick up a partial file left by an earlier run for the same URL, or start empty."""
    meta = _read_sidecar(at.sidecar)
    if at.part.exists() and meta.get("url") == at.url:
        try:
            st.hash_existing()
        except OSError:
            st.restart()
        if st.offset:
            at.log(f"resuming a partial download ({human_bytes(st.offset)} already here)")
            st.drop_sink("the download resumed a partial file from an earlier run")
        at.meta = meta
        at.total = meta.get("total") if isinstance(meta.get("total"), int) else None
    else:
        _unlink(at.part)
        at.meta = {"url": at.url}


def _attempt(session, at: _Attempt, st: _State, progress: Progress | None, check_space) -> bool:
    """One request: True when the file is complete. Raises _Retry to try again (_Restart to
    start over from byte 0)."""
    headers = _range_headers(at, st)
    resp = _get(session, at, headers)
    with resp:
        verdict = _check_status(resp, at, st)
        if verdict == "done":
            return True
        _remember(resp, at, st)
        if check_space is not None and not at.space_checked and at.total is not None:
            check_space(at.total - st.offset)
            at.space_checked = True
        if not st.offset and st.sink is not None and (at.total or 0) >= DIRECTORY_FIRST and not _encoded(resp):
            _directory_first(session, at, st, resp)
        if progress is not None:
            progress.start(at.total, st.offset)
        st.stream(resp, progress, decode=_encoded(resp))
    if at.total is not None and st.offset < at.total:
        raise _Retry(f"connection closed after {human_bytes(st.offset)} of {human_bytes(at.total)}")
    if at.total is not None and st.offset > at.total:
        raise DoctorError(f"the server sent {st.offset} bytes, more than the {at.total} it announced",
                          "the mirror or a proxy is altering the file; try another --mirror", error_id="fetch.bad-length")
    return True


def _directory_first(session, at: _Attempt, st: _State, resp) -> None:
    """Before the body, the archive's central directory by range requests (directory.py), so
    that the unzip creates the files while the bytes before them arrive. An optimisation: any
    answer it cannot use is logged and the transfer goes on as before."""
    import requests
    import urllib3

    from doctor.fetch.directory import Unusable, read_directory

    use = getattr(st.sink, "use_directory", None)
    if use is None or (resp.headers.get("Accept-Ranges") or "").strip().lower() != "bytes":
        return
    validator = _validator(at.meta)
    try:
        directory = read_directory(lambda spec, most: _range(session, at, spec, most, validator))
    except (Unusable, DoctorError, _Retry, requests.exceptions.RequestException, urllib3.exceptions.HTTPError,
            OSError) as exc:
        at.log(f"the central directory was not read first ({_short(exc)}); files are created as they arrive")
        return
    if use(directory):
        at.log(f"read the central directory first: {len(directory.entries)} entries, created ahead of their bytes")


def _range(session, at: _Attempt, spec: str, most: int, validator) -> tuple[int, bytes, int]:
    """(offset, bytes, file size) of one `Range: bytes=<spec>` answer from the URL the body comes
    from, at most `most` bytes; `Unusable` for any other answer (a full body is not read)."""
    from doctor.fetch.directory import Unusable

    url = at.final_url or at.url
    _check_url(url, at)
    headers = {"Range": f"bytes={spec}"}
    if validator:
        headers["If-Range"] = validator  # the same file as the body's, or a full answer we do not read
    # The body's answer waits meanwhile: a server slow to answer a range costs seconds, not a minute.
    timeout = (min(at.timeout[0], 5.0), min(at.timeout[1], 10.0))
    with session.get(url, headers=headers, stream=True, timeout=timeout, allow_redirects=False) as resp:
        answered = _content_range(resp)
        if resp.status_code != 206 or _encoded(resp):
            raise Unusable(f"HTTP {resp.status_code} to a range request")
        if answered is None or answered[2] is None:
            raise Unusable("a Content-Range that is not a range of a known size")
        start, end, size = answered
        want = end - start + 1
        if not 0 < want <= most or end >= size:
            raise Unusable(f"a range of {want} bytes answered")
        data = resp.raw.read(want + 1)
        if len(data) != want:
            raise Unusable(f"{len(data)} bytes in a range of {want}")
    return start, data, size


def _range_headers(at: _Attempt, st: _State) -> dict:
    if not st.offset:
        return {}
    headers = {"Range": f"bytes={st.offset}-"}
    validator = _validator(at.meta)
    if validator:
        headers["If-Range"] = validator
    return headers


def _validator(meta: dict) -> str | None:
    """The ETag or Last-Modified to send back as If-Range: from the sidecar, a file on disk, so
    only one that can be sent as a header (printable ASCII) — else the resume is unguarded by
    nothing and restarts instead."""
    value = meta.get("etag") or meta.get("last_modified")
    return value if isinstance(value, str) and 0 < len(value) <= 1024 and value.isascii() and value.isprintable() else None


def _get(session, at: _Attempt, headers: dict):
    """GET `at.url`, following redirects one at a time: each Location is checked before it is
    requested, so a redirect from https down to http is refused before the plain request is
    sent, and a loop ends with a clear error."""
    import requests

    url = at.url
    seen = {url}
    for _ in range(MAX_REDIRECTS + 1):
        _check_url(url, at)
        try:
            resp = session.get(url, headers=headers, stream=True, timeout=at.timeout, allow_redirects=False)
        except requests.exceptions.SSLError as exc:
            raise DoctorError(f"TLS error talking to {_host(url)}: {_short(exc)}",
                              "a proxy that intercepts HTTPS needs its CA trusted: export REQUESTS_CA_BUNDLE=/path/to/its-ca.pem "
                              "(the doctor downloads with requests); else check the system's CA certificates and clock",
                              error_id="fetch.tls-error") from exc
        except requests.exceptions.InvalidURL as exc:
            raise DoctorError(f"invalid URL {redact_url(url)!r}: {_short(exc)}", _BAD_URL_HINT if url == at.url
                              else _MISCONFIGURED, error_id="fetch.bad-url") from exc
        except requests.exceptions.InvalidHeader as exc:  # two different Content-Lengths, say
            raise DoctorError(f"{_host(url)} answered with a malformed header: {_short(exc)}", _MISCONFIGURED,
                              error_id="fetch.http-error") from exc
        except ValueError as exc:
            # The URL asked for was checked above and the headers sent are ours: what is left is
            # the answer's Location, which requests parses even when it does not follow it.
            raise DoctorError(f"{_host(url)} answered with a redirect to a URL that does not parse ({_short(exc)})",
                              _MISCONFIGURED, error_id="fetch.bad-url") from exc
        except requests.exceptions.ProxyError as exc:  # a setting, not a flaky network: retrying will not help
            raise DoctorError(f"cannot reach the proxy {_proxy_for(url)} that the environment sets for {_host(url)}",
                              "check HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY (unset them where there is no proxy)",
                              error_id="fetch.proxy-error") from exc
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            gai = _cause(exc, socket.gaierror)
            if gai is not None and gai.errno != socket.EAI_AGAIN:  # no such name here: asking again will not help
                raise DoctorError(f"cannot resolve {_host(url)}: {gai.strerror or gai}",
                                  "this machine gets no address for it: offline, a typo in --mirror or --url, or a "
                                  "network that reaches out only through a proxy (set HTTPS_PROXY); offline, install "
                                  "a zip copied here with --archive", error_id="fetch.dns-error") from exc
            refused = _cause(exc, ConnectionRefusedError)
            why = (f"cannot resolve {_host(url)} (a temporary failure)" if gai is not None
                   else f"{_host(url)} refused the connection" if refused is not None else f"connection failed: {_short(exc)}")
            raise _Retry(why) from exc
        if not resp.is_redirect:
            at.final_url = url
            return resp
        location = resp.headers.get("Location", "")
        resp.close()
        from urllib.parse import urljoin

        target = urljoin(url, location)
        if target in seen:
            raise DoctorError(f"redirect loop: {redact_url(url)} leads back to {redact_url(target)}",
                              _MISCONFIGURED, error_id="fetch.redirect-loop")
        seen.add(target)
        url = _drop_credentials(url, target)
    raise DoctorError(f"more than {MAX_REDIRECTS} redirects from {redact_url(at.url)}",
                      _MISCONFIGURED, error_id="fetch.too-many-redirects")


_MISCONFIGURED = "the server or mirror is misconfigured; try another --mirror or --url"
_BAD_URL_HINT = "check the URL given with --url or --mirror (or $DOCTOR_LIBTORCH_MIRROR)"


def _check_url(url: str, at: _Attempt) -> None:
    """Before a URL is requested (the one asked for, each redirect's): one requests and urllib3
    can connect to, over a scheme allowed."""
    came_from = f" (redirected from {redact_url(at.url)})" if url != at.url else ""
    hint = _BAD_URL_HINT if url == at.url else _MISCONFIGURED
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        raise DoctorError(f"cannot fetch {redact_url(url)!r}{came_from}: not a valid URL ({exc})", hint,
                          error_id="fetch.bad-url") from exc
    scheme = parts.scheme.lower()
    problem = host_problem(parts.hostname) if scheme in ("http", "https") else None
    if problem:
        raise DoctorError(f"cannot fetch {redact_url(url)!r}{came_from}: {problem}", hint, error_id="fetch.bad-url")
    if scheme == "https":
        return
    if scheme == "http":
        downgrade = urlsplit(at.url).scheme.lower() == "https"
        if at.allow_http and not downgrade:
            return
        raise DoctorError(f"refusing plain HTTP: {redact_url(url)}{came_from}",
                          "an https download is never continued over http" if downgrade
                          else "use --allow-http only for a mirror you trust", error_id="fetch.plain-http")
    raise DoctorError(f"refusing to fetch {redact_url(url)!r}{came_from}: not an http(s) URL",
                      hint if url == at.url else "the server or mirror sends downloads elsewhere; give an https "
                      "--url or --mirror that serves the file itself", error_id="fetch.bad-url")


def _drop_credentials(old: str, new: str) -> str:
    """Credentials in the URL are for its own host: a redirect elsewhere does not carry them
    (requests' own rule for Authorization headers)."""
    a, b = urlsplit(old), urlsplit(new)
    if a.hostname == b.hostname or "@" not in b.netloc:
        return new
    return b._replace(netloc=b.netloc.rpartition("@")[2]).geturl()


def _check_status(resp, at: _Attempt, st: _State) -> str:
    """"go" (stream the body) or "done" (nothing left to fetch); or raise for an answer that is
    final (_Retry for one worth retrying, _Restart when the partial file was dropped)."""
    status = resp.status_code
    where = redact_url(at.final_url)
    if status in RETRY_STATUS:
        raise _Retry(f"HTTP {status} from {_host(at.final_url)}", _retry_after(resp))
    if status == 416 and st.offset:
        if at.total is not None and st.offset == at.total:
            return "done"  # everything is already here
        _start_over(at, st, "the server refused to resume", "the server refused to resume (HTTP 416)")
    if status in (404, 410):
        raise DoctorError(f"not found (HTTP {status}): {where}",
                          "the catalog may be out of date or the file was removed; "
                          "check --version/--variant, or give --url or --mirror", error_id="fetch.not-found")
    if 300 <= status < 400 and status != 304:
        raise DoctorError(f"HTTP {status} redirect without a usable Location from {where}",
                          "the server or mirror is misconfigured; try another --mirror or --url", error_id="fetch.http-error")
    if status >= 400:
        reason = "".join(c for c in (resp.reason or "")[:80] if c.isprintable())
        raise DoctorError(f"HTTP {status} {reason} from {where}".replace("  ", " "),
                          "check the URL, or the mirror's access rules", error_id="fetch.http-error")
    ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if ctype in ("text/html", "application/xhtml+xml"):  # a proxy's login page, a portal, an error page
        raise DoctorError(f"{where} answered with a web page (Content-Type {ctype}), not a zip archive",
                          "a proxy or captive portal may be intercepting downloads (log in to it, or set "
                          "HTTPS_PROXY); else check --url or --mirror", error_id="fetch.not-an-archive")
    if status == 206 and st.offset:
        answered = _content_range(resp)
        asked = st.offset
        if answered is None or answered[0] != asked:
            _start_over(at, st, "the server answered a different range", f"the server answered another range than bytes={asked}-")
        if answered[2] is not None and at.total is not None and answered[2] != at.total:
            # If-Range held, yet the size is not the one first announced: these bytes may be of another copy.
            _start_over(at, st, f"the server's resume gives the file as {answered[2]} bytes, not {at.total}",
                        f"the server's resume gave another size for the file ({answered[2]} bytes, not {at.total})")
        if answered[2] is not None:
            at.total = answered[2]
        return "go"
    if status == 206:
        # Asked for the whole file: only a "part" that is all of it will do (a cache or proxy
        # answering with another request's range once had `bytes 100-…` taken as the file).
        answered = _content_range(resp)
        if answered is None or answered[0] != 0 or answered[2] is None or answered[1] + 1 != answered[2]:
            value = resp.headers.get("Content-Range", "")
            raise DoctorError(f"{where} answered a request for the whole file with a part of it (HTTP 206, "
                              f"Content-Range {value[:80]!r})", _MISCONFIGURED, error_id="fetch.http-error")
        at.total = answered[2]
    else:
        if st.offset:
            at.log("the file changed on the server (or it cannot resume); starting over")
            st.restart()
        at.total = _count(resp.headers.get("Content-Length"))
    if _encoded(resp):
        # Asked for identity, got gzip anyway: decode it, and since Content-Length counts the
        # compressed bytes, stop comparing lengths (the sha256 and the lock still check the file).
        at.log(f"the server compressed the answer ({resp.headers.get('Content-Encoding')}) although asked "
               "not to; decoding it")
        at.total = None
    return "go"


def _start_over(at: _Attempt, st: _State, said: str, why: str) -> NoReturn:
    """Drop the partial file; the next request starts from byte 0 (a failure: see _Restart)."""
    at.log(f"{said}; starting over")
    st.restart()
    raise _Restart(why)


def _content_range(resp) -> tuple[int, int, int | None] | None:
    """(first byte, last byte, the file's size or None for `*`) of the answer's Content-Range;
    None for anything else, numbers past any file's size included."""
    m = _CONTENT_RANGE.fullmatch((resp.headers.get("Content-Range") or "").strip())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), None if m.group(3) == "*" else int(m.group(3))


def _encoded(resp) -> bool:
    enc = (resp.headers.get("Content-Encoding") or "").strip().lower()
    return enc not in ("", "identity")


def _remember(resp, at: _Attempt, st: _State) -> None:
    """What a later run needs to resume: the URL, the total, a validator (not for a decoded body)."""
    encoded = _encoded(resp)
    at.meta.update(url=at.url, total=at.total, etag=None if encoded else resp.headers.get("ETag"),
                   last_modified=None if encoded else resp.headers.get("Last-Modified"))
    try:
        _write_sidecar(at.sidecar, at.meta)
    except OSError as exc:
        from doctor.fetch.fsops import os_error

        raise os_error(exc, "write beside the download at", at.sidecar) from exc


def _wait(retry: _Retry, failures: int, backoff: float, offset: int, log) -> None:
    wait = retry.wait if retry.wait is not None else backoff * (2 ** max(failures - 1, 0))
    wait = min(wait, 30.0)
    log(f"{retry}; retrying in {wait:.1f} s" + (f" from {human_bytes(offset)}" if offset else ""))
    time.sleep(wait)


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        from doctor.fetch.fsops import os_error

        raise os_error(exc, "remove", p) from exc


class _State:
    """The partial file's length and the running sha256 of its bytes."""

    def __init__(self, part: Path, sink: Sink | None = None) -> None:
        self.part = part
        self.offset = 0
        self.hasher = hashlib.sha256()
        self.sink = sink

    def drop_sink(self, why: str) -> None:
        if self.sink is not None:
            self.sink.abandon(why)
            self.sink = None

    def restart(self) -> None:
        self.drop_sink("the download started over")
        self.part.unlink(missing_ok=True)
        self.offset = 0
        self.hasher = hashlib.sha256()

    def hash_existing(self) -> None:
        with open(self.part, "rb") as fh:
            while chunk := fh.read(CHUNK):
                self.hasher.update(chunk)
                self.offset += len(chunk)

    def stream(self, resp, progress: Progress | None, decode: bool = False) -> None:
        import requests

        from doctor.fetch.fsops import os_error

        # urllib3 discards the bytes of a read that ends in IncompleteRead; we count the
        # length ourselves (offset vs total), so let it hand over what arrived.
        if hasattr(resp.raw, "enforce_content_length"):
            resp.raw.enforce_content_length = False
        if decode and self.offset:
            self.restart()  # a decoded body cannot be resumed byte for byte
        if decode:
            self.drop_sink("the server compressed the answer")
        elif self.sink is not None and self.sink.position != self.offset:
            self.drop_sink("the download resumed at a byte the unpack had not seen")
        try:
            self._stream(resp, progress, requests)
        except OSError as exc:
            if isinstance(exc, requests.exceptions.RequestException):
                raise
            raise os_error(exc, "write the download to", self.part) from exc

    def _stream(self, resp, progress: Progress | None, requests) -> None:
        import urllib3

        sink = self.sink
        with open(self.part, "r+b" if self.offset else "wb") as fh:
            fh.seek(self.offset)
            fh.truncate()
            try:
                for chunk in _arriving(resp):
                    fh.write(chunk)
                    self.hasher.update(chunk)
                    self.offset += len(chunk)
                    if sink is not None:
                        sink.feed(chunk)
                    if progress is not None:
                        progress.advance(len(chunk))
            except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError,
                    requests.exceptions.Timeout, requests.exceptions.ContentDecodingError,
                    urllib3.exceptions.HTTPError) as exc:  # the last: read1's, which requests does not wrap
                raise _Retry(f"transfer interrupted after {human_bytes(self.offset)}: {_short(exc)}") from exc


def _arriving(resp):
    """The body in the pieces it arrives in, at most NET_CHUNK each: read1 returns what has come,
    so the bytes received before a stall or a drop are kept (iter_content waits for a whole
    chunk, and a read that times out loses what it had: a link that sent 200 KiB and stalled
    never got past 0 B). iter_content where urllib3 is too old to have read1."""
    read1 = getattr(resp.raw, "read1", None)
    if read1 is None:
        yield from resp.iter_content(NET_CHUNK)
        return
    while chunk := read1(NET_CHUNK, decode_content=True):
        yield chunk


def _read_sidecar(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_sidecar(path: Path, meta: dict) -> None:
    from doctor import writes

    # Atomic, through a fresh temp name: never written through a link planted at a fixed name.
    writes.atomic_write(path, json.dumps(meta).encode("utf-8"))


def _retry_after(resp) -> float | None:
    seconds = _count(resp.headers.get("Retry-After"))
    return None if seconds is None else float(seconds)


def _count(value: str | None) -> int | None:
    """A header's non-negative integer (Content-Length, Retry-After), or None for anything else."""
    value = (value or "").strip()
    return int(value) if _COUNT.fullmatch(value) else None


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or redact_url(url) or url
    except ValueError:
        return "the server"


def _cause(exc: BaseException, kind: type) -> BaseException | None:
    """The first exception of `kind` behind `exc`: requests wraps urllib3's, which wraps the socket's."""
    seen = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, kind):
            return e
        stack.extend([e.__cause__, e.__context__, *(a for a in getattr(e, "args", ()) if isinstance(a, BaseException))])
        reason = getattr(e, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
    return None


def _proxy_for(url: str) -> str:
    """The proxy requests takes from the environment for `url` (NO_PROXY honoured), credentials redacted."""
    from requests.utils import get_environ_proxies, select_proxy

    proxy = select_proxy(url, get_environ_proxies(url))
    return redact_url(proxy) if proxy else "(unknown)"


def _short(exc: BaseException) -> str:
    """An exception's text for one log line: query strings and credentials it quotes redacted."""
    text = redact_secrets(str(exc))
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
