"""Helpers for the fetch tests: a real local HTTP server that can misbehave on cue, and small
libtorch-shaped zips built with the modes and symlinks real archives carry."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# -- zips --


def zinfo(name: str, mode: int, system: int = 3, dos: int = 0) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, (2024, 1, 2, 3, 4, 6))
    info.create_system = system
    info.external_attr = (mode << 16) | dos
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def libtorch_zip(path: Path, version: str = "2.13.0", variant: str = "cpu", *, payload: int = 64 << 10,
                 abi_line: str | None = None, seed: int = 0, extra: list | None = None,
                 build_version: bool = True) -> Path:
    """A small zip laid out like an official one: libtorch/{lib,include,share,bin}, a .so
    symlink, executables, an empty dir, build-version. `payload` bytes of incompressible data
    make the body long enough to drop a connection in the middle of it."""
    rnd = hashlib.shake_256(f"{seed}".encode()).digest(payload)
    config = "set(TORCH_FOUND TRUE)\n"
    if abi_line is not None:
        config = f'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI={abi_line}")\n' + config
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zinfo("libtorch/", 0o40755, dos=0x10), b"")
        if build_version:
            zf.writestr(zinfo("libtorch/build-version", 0o100644), f"{version}+{variant}\n")
        zf.writestr(zinfo("libtorch/build-hash", 0o100644), "0123abcd\n")
        zf.writestr(zinfo("libtorch/lib/", 0o40755, dos=0x10), b"")
        zf.writestr(zinfo("libtorch/lib/libc10.so", 0o100755), rnd)
        zf.writestr(zinfo("libtorch/lib/libtorch.so.2", 0o100755), b"\x7fELF fake torch")
        zf.writestr(zinfo("libtorch/lib/libtorch.so", 0o120777), b"libtorch.so.2")
        zf.writestr(zinfo("libtorch/include/torch/csrc/api/include/torch/torch.h", 0o100644), b"#pragma once\n")
        zf.writestr(zinfo("libtorch/include/c10/macros/Macros.h", 0o100644), b"#define C10 1\n")
        zf.writestr(zinfo("libtorch/share/cmake/Torch/TorchConfig.cmake", 0o100644), config)
        zf.writestr(zinfo("libtorch/share/empty/", 0o40700, dos=0x10), b"")
        zf.writestr(zinfo("libtorch/bin/protoc", 0o100755), b"#!/bin/sh\necho protoc\n")
        for name, mode, data in extra or []:
            zf.writestr(zinfo(name, mode), data)
    return path


def set_raw_external_attr(path: Path, name: str, value: int) -> None:
    """Patch one entry's external attributes in the central directory (Python's zipfile
    refuses to write 0 there; some real zip tools do)."""
    data = bytearray(path.read_bytes())
    encoded = name.encode()
    pos = 0
    while True:
        pos = data.find(b"PK\x01\x02", pos)
        if pos < 0:
            raise KeyError(name)
        n, m, k = int.from_bytes(data[pos + 28:pos + 30], "little"), int.from_bytes(data[pos + 30:pos + 32], "little"), int.from_bytes(data[pos + 32:pos + 34], "little")
        if bytes(data[pos + 46:pos + 46 + n]) == encoded:
            data[pos + 38:pos + 42] = value.to_bytes(4, "little")
            path.write_bytes(bytes(data))
            return
        pos += 46 + n + m + k


def tree_listing(root: Path) -> list[tuple]:
    """(path, type, permission bits, link target or content hash) for everything under root."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out.append((rel, "l", st.st_mode & 0o7777, os.readlink(p)))
            elif p.is_dir():
                out.append((rel, "d", st.st_mode & 0o7777, None))
            else:
                out.append((rel, "f", st.st_mode & 0o7777, hashlib.sha256(p.read_bytes()).hexdigest()))
    return sorted(out)


def nix_hash_sri(path: Path) -> str:
    """`nix-hash --type sha256` (hex) turned into SRI form: the reference we check against."""
    import base64

    out = subprocess.run(["nix-hash", "--type", "sha256", str(path)], capture_output=True, text=True, check=True)
    return "sha256-" + base64.b64encode(bytes.fromhex(out.stdout.strip())).decode()


# -- a local HTTP server with scripted faults --

TLS = Path(__file__).resolve().parents[1] / "fixtures" / "tls"


class Server:
    """Serves `files` (path → bytes). `script(path, [...])` queues behaviours for the next
    requests of that path: an int status (503, 404), ("drop", n) to send the headers of the
    full answer then only n bytes and hang up, ("stall", n, secs) to send n bytes and then nothing
for secs before hanging up (a link that stalls), ("norange",) to ignore Range, ("slow", secs) to
    spread the body over secs, ("redirect", url), ("cut", n) to stop at byte n of the file
    whatever range was asked (a body truncated at the source), ("page", html) to answer 200 with
    that text/html body instead (a proxy's login page), ("serve", data) to answer that request from
`data` instead of the file (a copy that changed between two requests: its own ETag), ("lie",
data) to do so under the file's ETag (a mirror whose copies disagree), ("raw", status,
[(header, value), ...], body) to send exactly that answer whatever was asked (a header sent
twice, a value no parser expects). Ranges:
`bytes=N-`, `bytes=A-B` and `bytes=-N`. Every request is logged in `requests`."""

    def __init__(self, tls: bool = False) -> None:
        self.tls = tls
        self.files: dict[str, bytes] = {}
        self.scripts: dict[str, list] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.slow: dict[str, float] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                try:
                    server._handle(self)
                except (ConnectionResetError, BrokenPipeError):
                    # The client hung up mid-body (the doctor stops on a full disk): normal, and
                    # socketserver's traceback on stderr would read as the doctor's own.
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:  # HTTPS with the test CA of tests/fixtures/tls (what a proxy intercepting HTTPS presents)
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(TLS / "proxy-ca.pem", TLS / "proxy-ca.key")
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def add(self, path: str, data: bytes) -> str:
        self.files[path] = data
        return self.url(path)

    def script(self, path: str, steps: list) -> None:
        self.scripts.setdefault(path, []).extend(steps)

    def gets(self, path: str) -> list[str | None]:
        return [rng for p, rng in self.requests if p == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        from urllib.parse import unquote

        path = unquote(h.path)
        rng = h.headers.get("Range")
        with self.lock:
            self.requests.append((path, rng))
            steps = self.scripts.get(path) or []
            step = steps.pop(0) if steps else None
        if isinstance(step, int):
            h.send_response(step)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if isinstance(step, tuple) and step[0] == "page":
            h.send_response(200)
            h.send_header("Content-Type", "text/html; charset=utf-8")
            h.send_header("Content-Length", str(len(step[1])))
            h.end_headers()
            h.wfile.write(step[1])
            return
        if isinstance(step, tuple) and step[0] == "raw":
            h.send_response(step[1])
            for name, value in step[2]:
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(step[3])
            return
        if isinstance(step, tuple) and step[0] == "redirect":
            h.send_response(302)
            h.send_header("Location", step[1])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        data = self.files.get(path)
        etag = None if data is None else '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        if isinstance(step, tuple) and step[0] in ("serve", "lie"):
            data = step[1]
            etag = etag if step[0] == "lie" else '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        if data is None:
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        start, end = 0, len(data) - 1
        m = re.match(r"bytes=(\d*)-(\d*)$", rng or "")
        honour = m and (m.group(1) or m.group(2)) and not (isinstance(step, tuple) and step[0] == "norange")
        if honour and h.headers.get("If-Range") not in (None, etag):
            honour = False
        if honour:
            if m.group(1):
                start, end = int(m.group(1)), min(int(m.group(2) or end), end)
            else:
                start = max(0, len(data) - int(m.group(2)))
            if start >= len(data):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            h.send_response(200)
        body = data[start:end + 1]
        h.send_header("Content-Length", str(len(body)))
        h.send_header("ETag", etag)
        h.send_header("Accept-Ranges", "bytes")
        h.end_headers()
        if isinstance(step, tuple) and step[0] == "stall":
            h.wfile.write(body[: step[1]])
            h.wfile.flush()
            time.sleep(step[2])
            h.close_connection = True
            return
        if isinstance(step, tuple) and step[0] in ("drop", "cut"):
            h.wfile.write(body[: step[1]] if step[0] == "drop" else body[: max(0, step[1] - start)])
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
            h.close_connection = True
            return
        seconds = step[1] if isinstance(step, tuple) and step[0] == "slow" else self.slow.get(path, 0.0)
        if seconds:
            pieces = 20
            size = max(1, len(body) // pieces)
            for i in range(0, len(body), size):
                h.wfile.write(body[i:i + size])
                h.wfile.flush()
                time.sleep(seconds / pieces)
        else:
            h.wfile.write(body)


def doctor_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "DOCTOR_"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def run_doctor(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True,
                          cwd=cwd, env=env or doctor_env(), timeout=timeout)


class DoctorMain:
    """Lets click's CliRunner drive `doctor.cli.main` (which maps errors to exit codes) with
    the subcommand's arguments; CliRunner only needs `.name` and `.main(args=...)`."""

    def __init__(self, *prefix: str) -> None:
        self.prefix = prefix
        self.name = "doctor"

    def main(self, args=None, prog_name=None, **kw):
        from doctor.cli import main

        sys.exit(main([*self.prefix, *(args or ())]))
