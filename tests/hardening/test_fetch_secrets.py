"""Threat: credentials and tokens in --url/--mirror persisted (lock, install record, emit nix,
JSON, logs), and an https download continued over plain http via a redirect."""

from __future__ import annotations

import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from testsupport.fetch_hardening_support import NAME, doctor, hermetic_env, libtorch_zip, server  # noqa: F401

from doctor.fetch.names import redact_url

SECRETS = ("hunter2", "s3cr3t-token")


def test_redact_url():
    assert redact_url("https://bob:hunter2@h.example/p/f.zip?token=x#frag") == "https://***@h.example/p/f.zip?***#***"
    assert redact_url("https://h.example/p/f.zip") == "https://h.example/p/f.zip"


def _secret_free(*texts: str) -> bool:
    return not any(s in t for s in SECRETS for t in texts)


def test_credentials_and_tokens_never_persisted(server, tmp_path):
    data = libtorch_zip(tmp_path / "src.zip").read_bytes()
    quoted = NAME.replace("+", "%2B")
    server.add(NAME + "?token=s3cr3t-token", data)
    url = server.url(quoted).replace("http://", "http://bob:hunter2@") + "?token=s3cr3t-token"
    common = ["fetch-libtorch", "--url", url, "--allow-http", "--dest", str(tmp_path / "dest"),
              "--lock", str(tmp_path / "libtorch.lock"), "--backoff", "0.01"]
    dry = doctor(tmp_path, *common, "--dry-run", "--json")
    plain = doctor(tmp_path, *common, "--dry-run")
    run = doctor(tmp_path, *common)
    assert run.exit_code == 0, run.output
    again = doctor(tmp_path, *common, "--json")
    assert again.exit_code == 0
    record = (tmp_path / "dest/torch-doctor.json").read_text()
    lock = (tmp_path / "libtorch.lock").read_text()
    nix = doctor(tmp_path, "emit", "nix", "--libtorch", str(tmp_path / "dest"))
    assert nix.exit_code in (0, 1) and "Traceback" not in nix.output
    assert _secret_free(dry.output, plain.output, run.output, again.output, record, lock, nix.output)
    assert "***" in json.loads(lock)["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]["url"]
    assert json.loads(record)["source"]["url"] is None  # nothing for emit nix to publish
    assert "fetching http://***@127.0.0.1" in run.stderr


def test_mirror_credentials_not_in_notes_or_errors(server, tmp_path):
    env = hermetic_env(tmp_path, DOCTOR_LIBTORCH_MIRROR=server.base.replace("http://", "http://u:hunter2@") + "/missing")
    r = doctor(tmp_path, "fetch-libtorch", "--version", "2.13.0", "--variant", "cpu", "--allow-http", "--no-lock",
               "--dest", str(tmp_path / "dest"), "--retries", "0", env=env)
    assert r.exit_code == 1 and "not found (HTTP 404)" in r.stderr
    dry = doctor(tmp_path, "fetch-libtorch", "--version", "2.13.0", "--variant", "cpu", "--allow-http", "--no-lock",
                 "--dry-run", "--json", env=env)
    assert dry.exit_code == 0 and _secret_free(r.output, dry.output)


# -- redirects --


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(d / "key.pem"), "-out", str(d / "cert.pem")],
                   check=True, capture_output=True)
    return d / "cert.pem", d / "key.pem"


class Redirector:
    """A real TLS server on 127.0.0.1 whose every answer is a 302 to `location(path)`."""

    def __init__(self, cert, location) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.requests.append(self.path)
                self.send_response(302)
                self.send_header("Location", location(self.path))
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_https_to_http_redirect_refused_before_the_plain_request(server, tmp_path, cert):
    server.add(NAME, libtorch_zip(tmp_path / "src.zip").read_bytes())
    tls = Redirector(cert, lambda path: server.url(NAME))
    try:
        env = hermetic_env(tmp_path, REQUESTS_CA_BUNDLE=str(cert[0]))
        for extra in ((), ("--allow-http",)):
            r = doctor(tmp_path, "fetch-libtorch", "--url", tls.base + "/x/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
                       *extra, "--dest", str(tmp_path / "dest"), "--no-lock", env=env)
            assert r.exit_code == 1 and "refusing plain HTTP" in r.stderr and "redirected from https://" in r.stderr
        assert len(tls.requests) == 2 and server.requests == []  # the plain request was never sent
    finally:
        tls.close()


def test_redirect_loop_is_a_clean_error(tmp_path, cert):
    tls = Redirector(cert, lambda path: "/a" if path != "/a" else "/b")
    try:
        env = hermetic_env(tmp_path, REQUESTS_CA_BUNDLE=str(cert[0]))
        r = doctor(tmp_path, "fetch-libtorch", "--url", tls.base + "/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
                   "--dest", str(tmp_path / "dest"), "--no-lock", env=env)
        assert r.exit_code == 1 and "redirect loop" in r.stderr and "hint:" in r.stderr
        assert len(tls.requests) <= 11
    finally:
        tls.close()


def test_endless_redirect_chain_is_bounded(tmp_path, cert):
    tls = Redirector(cert, lambda path: path + "x")
    try:
        env = hermetic_env(tmp_path, REQUESTS_CA_BUNDLE=str(cert[0]))
        r = doctor(tmp_path, "fetch-libtorch", "--url", tls.base + "/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
                   "--dest", str(tmp_path / "dest"), "--no-lock", env=env)
        assert r.exit_code == 1 and "more than 10 redirects" in r.stderr
    finally:
        tls.close()
