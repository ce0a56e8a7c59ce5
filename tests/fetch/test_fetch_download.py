"""The downloader against a real local HTTP server that drops connections, answers 503/404,
truncates bodies, ignores Range, and changes the file between runs."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from doctor.errors import DoctorError
from doctor.fetch.download import LogProgress, download

DATA = hashlib.shake_256(b"libtorch").digest(300_000)
SHA = hashlib.sha256(DATA).hexdigest()


def fetch(server, tmp_path, path="/lt.zip", **kw):
    logs: list[str] = []
    kw.setdefault("allow_http", True)
    kw.setdefault("backoff", 0.01)
    result = download(server.url(path), tmp_path / "x.part", log=logs.append,
                      progress=LogProgress("lt.zip", logs.append), **kw)
    return result, logs


def test_plain_download_hashes_while_streaming(server, tmp_path):
    server.add("/lt.zip", DATA)
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.size == len(DATA) == (tmp_path / "x.part").stat().st_size
    assert result.attempts == 1 and result.resumed_at == []
    assert server.gets("/lt.zip") == [None]
    assert logs[0] == "downloading lt.zip (293.0 KiB)"  # a few plain lines, no bar, off a terminal
    assert len(logs) <= 5


def test_resume_after_the_server_drops_the_connection_mid_body(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("drop", 100_000)])
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA
    assert server.gets("/lt.zip") == [None, "bytes=100000-"]
    assert result.resumed_at == [100_000]
    assert any("interrupted after 97.7 KiB" in line or "closed after 97.7 KiB" in line for line in logs), logs


def test_retry_on_503_with_backoff(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [503, 503])
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.attempts == 3
    assert len(server.gets("/lt.zip")) == 3
    assert sum("HTTP 503" in line and "retrying in" in line for line in logs) == 2


def test_gives_up_after_the_retries(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [503] * 10)
    with pytest.raises(DoctorError, match="failed after 3 attempts: HTTP 503"):
        fetch(server, tmp_path, retries=2)
    assert len(server.gets("/lt.zip")) == 3


def test_no_retry_on_404(server, tmp_path):
    with pytest.raises(DoctorError, match=r"not found \(HTTP 404\)"):
        fetch(server, tmp_path, path="/missing.zip")
    assert len(server.gets("/missing.zip")) == 1


def test_truncated_body_fails_and_keeps_the_part_for_a_later_resume(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("cut", 120_000)] * 4)  # 1 with progress + 3 without
    with pytest.raises(DoctorError, match="failed after 4 attempts: connection closed after 117.2 KiB of 293.0 KiB"):
        fetch(server, tmp_path, retries=2)
    assert (tmp_path / "x.part").stat().st_size == 120_000
    # the source is whole again: the next run asks only for the rest
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA
    assert server.gets("/lt.zip")[-1] == "bytes=120000-"
    assert any("resuming a partial download" in line for line in logs)


def test_server_ignoring_range_restarts_cleanly(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("drop", 50_000), ("norange",)])
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.size == len(DATA)
    assert any("starting over" in line for line in logs)


def test_file_changed_between_runs_is_not_spliced(server, tmp_path):
    """If-Range: a partial file of the old version must not be completed with the new one."""
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("cut", 100_000)] * 3)
    with pytest.raises(DoctorError):
        fetch(server, tmp_path, retries=1)
    new = DATA[::-1]
    server.add("/lt.zip", new)
    result, _ = fetch(server, tmp_path)
    assert result.sha256 == hashlib.sha256(new).hexdigest()
    assert (tmp_path / "x.part").read_bytes() == new


def test_partial_from_another_url_is_discarded(server, tmp_path):
    server.add("/lt.zip", DATA)
    (tmp_path / "x.part").write_bytes(b"junk" * 100)
    (tmp_path / "x.part.json").write_text(json.dumps({"url": "https://elsewhere/x.zip"}))
    result, _ = fetch(server, tmp_path)
    assert result.sha256 == SHA and server.gets("/lt.zip") == [None]


def test_complete_part_left_by_a_failed_install_is_not_fetched_again(server, tmp_path):
    server.add("/lt.zip", DATA)
    fetch(server, tmp_path)
    result, _ = fetch(server, tmp_path)
    assert result.sha256 == SHA
    assert server.gets("/lt.zip") == [None, f"bytes={len(DATA)}-"]  # answered 416: nothing left


def test_plain_http_refused_unless_allowed(server, tmp_path):
    server.add("/lt.zip", DATA)
    with pytest.raises(DoctorError, match="refusing plain HTTP"):
        fetch(server, tmp_path, allow_http=False)
    assert not (tmp_path / "x.part").exists()


def test_redirect_followed(server, tmp_path):
    server.add("/real.zip", DATA)
    server.script("/lt.zip", [("redirect", server.url("/real.zip"))])
    result, _ = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.url.endswith("/real.zip")


def test_free_space_checked_before_the_body(server, tmp_path):
    server.add("/lt.zip", DATA)
    seen = []

    def check(remaining):
        seen.append(remaining)
        raise DoctorError("not enough free space")

    with pytest.raises(DoctorError, match="not enough free space"):
        fetch(server, tmp_path, check_space=check)
    assert seen == [len(DATA)]
    assert not (tmp_path / "x.part").exists() or (tmp_path / "x.part").stat().st_size == 0


def test_connection_refused_is_retried_then_reported(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    logs = []
    with pytest.raises(DoctorError, match="failed after 2 attempts: 127.0.0.1 refused the connection"):
        download(f"http://127.0.0.1:{port}/x.zip", tmp_path / "x.part", allow_http=True, retries=1,
                 backoff=0.01, log=logs.append)
    assert any("retrying" in line for line in logs)


@pytest.mark.parametrize("refusal", [
    416,  # "Range Not Satisfiable" to every resume
    ("raw", 206, [("Content-Range", f"bytes 10-{len(DATA) - 1}/{len(DATA)}"),
                  ("Content-Length", str(len(DATA) - 10))], DATA[10:]),  # another range than asked
])
def test_a_server_dropping_every_body_and_refusing_every_resume_is_given_up(server, tmp_path, refusal):
    """Each restart from byte 0 counts as a failure, and getting as far again is no progress:
    this once looped forever (thousands of requests), whatever --retries said."""
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("drop", 100_000), refusal] * 10)
    with pytest.raises(DoctorError, match="download failed after 4 attempts: the server") as err:
        fetch(server, tmp_path, retries=2)
    assert err.value.hint and err.value.id == "fetch.download-failed"
    assert server.gets("/lt.zip") == [None, "bytes=100000-", None, "bytes=100000-"]


def test_a_restart_that_gets_further_each_time_is_progress(server, tmp_path):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("drop", 50_000), 416, ("drop", 150_000), 416])
    result, logs = fetch(server, tmp_path, retries=1)
    assert result.sha256 == SHA
    assert sum("refused to resume; starting over" in line for line in logs) == 2


def _raw(status, *headers, body=b""):
    return ("raw", status, [*headers, ("Content-Length", str(len(body)))] if body is not None else list(headers), body)


@pytest.mark.parametrize("answer, says", [
    (("raw", 200, [("Content-Length", str(len(DATA))), ("Content-Length", "5")], DATA), "malformed header"),
    (_raw(302, ("Location", "http://[::1")), "a redirect to a URL that does not parse"),
    (_raw(302, ("Location", "ftp://x\x1b[2J\x1b]0;pwn\x07/a.zip")), "a redirect to a URL that does not parse"),
    (_raw(302, ("Location", "http://download..pytorch.org/x.zip")), "has an empty label"),
    (_raw(302, ("Location", "http://" + "a" * 64 + ".org/x.zip")), "has an empty label or one over 63"),
    (_raw(302, ("Location", "ftp://127.0.0.1/x.zip")), "not an http(s) URL"),
])
def test_hostile_answers_are_errors_with_a_hint_not_crashes(server, tmp_path, answer, says):
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [answer])
    with pytest.raises(DoctorError, match=re.escape(says)) as err:
        fetch(server, tmp_path)
    assert "misconfigured" in err.value.hint or "elsewhere" in err.value.hint
    assert len(server.gets("/lt.zip")) == 1


def test_a_length_or_wait_in_digits_beyond_ascii_is_no_number(server, tmp_path):
    """'²'.isdigit() is true, int('²') fails: a Content-Length or Retry-After of '²' read as a
    number crashed the doctor."""
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [_raw(503, ("Retry-After", "\u00b2")),
                              ("raw", 200, [("Content-Length", "\u00b2")], DATA)])
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.size == len(DATA)  # read to the end of the body, size unknown
    assert any("HTTP 503" in line and "retrying in 0.0 s" in line for line in logs), logs


@pytest.mark.parametrize("content_range", [f"bytes 100-{len(DATA) - 1}/{len(DATA)}", "bytes 0-99/300000", "",
                                           f"bytes 0-{len(DATA) - 1}/*", "bytes 0-" + "9" * 40 + "/" + "9" * 40])
def test_a_part_of_the_file_answering_a_request_for_all_of_it_is_refused(server, tmp_path, content_range):
    """A 206 to a request without Range was taken as the whole file whatever range it held."""
    body = DATA[100:] if content_range.startswith("bytes 100") else DATA
    server.script("/lt.zip", [("raw", 206, [("Content-Range", content_range), ("Content-Length", str(len(body)))],
                               body)])
    with pytest.raises(DoctorError, match="answered a request for the whole file with a part of it") as err:
        fetch(server, tmp_path)
    assert err.value.hint and err.value.id == "fetch.http-error"


def test_a_206_holding_all_of_the_file_is_the_file(server, tmp_path):
    server.script("/lt.zip", [("raw", 206, [("Content-Range", f"bytes 0-{len(DATA) - 1}/{len(DATA)}"),
                                            ("Content-Length", str(len(DATA)))], DATA)])
    result, _ = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.size == len(DATA)


@pytest.mark.parametrize("total", ["100", str(len(DATA) + 1), "9" * 40])
def test_a_resume_giving_another_size_for_the_file_starts_over(server, tmp_path, total):
    """The first answer said len(DATA) bytes; a resume saying otherwise (or a size of 40 digits)
    was believed: 'more than the 100 it announced', or waiting for bytes that never come."""
    server.add("/lt.zip", DATA)
    rest = DATA[100_000:]
    server.script("/lt.zip", [("drop", 100_000), ("raw", 206, [("Content-Range", f"bytes 100000-{len(DATA) - 1}/{total}"),
                                                               ("Content-Length", str(len(rest)))], rest)])
    result, logs = fetch(server, tmp_path)
    assert result.sha256 == SHA and result.size == len(DATA)
    assert server.gets("/lt.zip") == [None, "bytes=100000-", None]
    assert any("starting over" in line for line in logs), logs


def test_bytes_received_before_a_stall_are_kept(server, tmp_path):
    """A read waited for a whole 256 KiB chunk, and one that timed out lost what it had: a link
    that sent 200 KB and stalled said 'interrupted after 0 B' and started from 0 every time."""
    server.add("/lt.zip", DATA)
    server.script("/lt.zip", [("stall", 200_000, 3)])
    result, logs = fetch(server, tmp_path, timeout=(5.0, 0.5))
    assert result.sha256 == SHA
    assert server.gets("/lt.zip") == [None, "bytes=200000-"] and result.resumed_at == [200_000]
    assert any("interrupted after 195.3 KiB" in line for line in logs), logs
