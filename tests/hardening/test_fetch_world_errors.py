"""The world's errors during fetch-libtorch: each is exit 1 with `error:` and `hint:` (never a
traceback, never exit 3), and a previous install stays exactly as it was. Real read-only and
full file systems come from real tmpfs mounts (skipped, with the reason, where mounting is
not allowed)."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from testsupport.fetch_hardening_support import (NAME, base_args, doctor, hermetic_env, libtorch_zip, remount_ro, serve,  # noqa: F401
                                     server, tmpfs, tree_listing, zinfo)

from doctor.fetch.fsops import rmtree
from doctor.nar import nar_hash


def clean_error(r) -> bool:
    return r.exit_code == 1 and "error:" in r.stderr and "hint:" in r.stderr and "Traceback" not in r.output


def snapshot(dest: Path):
    return tree_listing(dest), (dest / "torch-doctor.json").read_text()


def test_read_only_destination(server, tmp_path):
    serve(server, tmp_path)
    serve(server, tmp_path, name="/cpu/libtorch-shared-with-deps-2.12.0+cpu.zip", version="2.12.0")
    with tmpfs(tmp_path / "ro", "8m") as mnt:
        dest = mnt / "dest"
        assert doctor(tmp_path, *base_args(server, tmp_path, dest)).exit_code == 0
        before = snapshot(dest)
        remount_ro(mnt)
        r = doctor(tmp_path, *base_args(server, tmp_path, dest, "--offline"))
        assert r.exit_code == 0 and "already installed" in r.stdout, r.output  # nothing to write
        args = base_args(server, tmp_path, dest)
        args[args.index("2.13.0")] = "2.12.0"
        r = doctor(tmp_path, *args)
        assert clean_error(r) and "not writable" in r.stderr, r.output
        assert snapshot(dest) == before


def test_read_only_lock_folder(server, tmp_path):
    serve(server, tmp_path)
    with tmpfs(tmp_path / "ro", "1m") as mnt:
        remount_ro(mnt)
        args = base_args(server, tmp_path)
        args[args.index("--lock") + 1] = str(mnt / "libtorch.lock")
        r = doctor(tmp_path, *args)
        assert clean_error(r) and "cannot write the lock file" in r.stderr, r.output
        assert not (tmp_path / "dest").exists() and server.requests == []  # failed before downloading


def test_xdg_cache_home_is_a_file(server, tmp_path):
    serve(server, tmp_path)
    (tmp_path / "cachefile").write_text("not a directory")
    env = hermetic_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cachefile"), LIBTORCH_HOME=None)
    r = doctor(tmp_path, "fetch-libtorch", "--mirror", server.base, "--allow-http", "--version", "2.13.0",
               "--variant", "cpu", "--no-lock", env=env)
    assert clean_error(r), r.output
    r = doctor(tmp_path, *base_args(server, tmp_path), env=env)  # explicit --dest: the lock's guard folder
    assert clean_error(r) and "XDG_CACHE_HOME" in r.stderr, r.output


def many_files_zip(path: Path, n: int, version="2.12.0") -> Path:
    return libtorch_zip(path, version=version,
                        extra=[(f"libtorch/include/many/f{i}.h", 0o100644, b"x") for i in range(n)])


def test_inode_exhaustion_keeps_the_previous_install(tmp_path):
    small = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    big = many_files_zip(tmp_path / "libtorch-shared-with-deps-2.12.0+cpu.zip", 200)
    with tmpfs(tmp_path / "full", "64m", inodes=60) as mnt:
        dest = mnt / "dest"
        r = doctor(tmp_path, "fetch-libtorch", "--archive", str(small), "--dest", str(dest), "--no-lock", "-q")
        assert r.exit_code == 0, r.output
        before = snapshot(dest)
        r = doctor(tmp_path, "fetch-libtorch", "--archive", str(big), "--dest", str(dest), "--no-lock", "-q")
        assert clean_error(r) and "No space left on device" in r.stderr, r.output
        assert snapshot(dest) == before
        assert [p.name for p in mnt.iterdir() if "staging" in p.name] == []


def test_disk_full_keeps_the_previous_install(server, tmp_path):
    serve(server, tmp_path)
    serve(server, tmp_path, name="/cpu/libtorch-shared-with-deps-2.12.0+cpu.zip", version="2.12.0", payload=6 << 20)
    with tmpfs(tmp_path / "full", "4m") as mnt:
        dest = mnt / "dest"
        assert doctor(tmp_path, *base_args(server, tmp_path, dest)).exit_code == 0
        before = snapshot(dest)
        args = base_args(server, tmp_path, dest)
        args[args.index("2.13.0")] = "2.12.0"
        r = doctor(tmp_path, *args)
        assert clean_error(r) and ("space" in r.stderr), r.output
        assert snapshot(dest) == before


def test_disk_full_while_unpacking_a_local_archive(tmp_path):
    big = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip", payload=6 << 20)
    with tmpfs(tmp_path / "full", "2m") as mnt:
        r = doctor(tmp_path, "fetch-libtorch", "--archive", str(big), "--dest", str(mnt / "dest"), "--no-lock", "-q")
        assert clean_error(r) and "space" in r.stderr, r.output
        assert list(mnt.iterdir()) == [mnt / ".dest.lock"]


def test_name_too_long(tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / ("d" * 300) / "dest"),
               "--no-lock", "-q")
    assert clean_error(r) and "File name too long" in r.stderr, r.output


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs a Linux /proc")
@pytest.mark.parametrize("dest", ["/proc/lt", "/sys/lt"])
def test_a_virtual_file_system_as_dest_is_named_not_writable(tmp_path, dest):
    """/proc refuses new files with ENOENT, though the folder exists: the hint said "a folder on
    the way to /proc/.lt.lock does not exist". Now as /sys (EACCES): the folder is not writable."""
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", dest, "--no-lock", "-q")
    assert clean_error(r) and f"error: cannot install into {dest}: {Path(dest).parent} is not writable" in r.stderr, r.output
    assert "does not exist" not in r.stderr


def patch_central(path: Path, name: str, flag_or: int = 0, method: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        n = int.from_bytes(data[pos + 28:pos + 30], "little")
        m = int.from_bytes(data[pos + 30:pos + 32], "little")
        k = int.from_bytes(data[pos + 32:pos + 34], "little")
        if bytes(data[pos + 46:pos + 46 + n]) == name.encode():
            flags = int.from_bytes(data[pos + 8:pos + 10], "little") | flag_or
            data[pos + 8:pos + 10] = flags.to_bytes(2, "little")
            if method is not None:
                data[pos + 10:pos + 12] = method.to_bytes(2, "little")
            path.write_bytes(bytes(data))
            return
        pos = data.find(b"PK\x01\x02", pos + 46 + n + m + k)
    raise KeyError(name)


@pytest.mark.parametrize("flag_or, method, says", [(1, None, "is encrypted"), (0, 93, "compressed with zstd"),
                                                   (0, 77, "compressed with method 77")])
def test_encrypted_or_unknown_method_entries(tmp_path, flag_or, method, says):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    patch_central(z, "libtorch/lib/libc10.so", flag_or, method)
    r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "dest"), "--no-lock", "-q")
    assert clean_error(r) and says in r.stderr, r.output
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("raw, says", [(b'{"lock_version": 1, "libtorch": {"\xff\xfe": {}}}', "is not UTF-8"),
                                       (b"\x00\x01binary", "not valid JSON"),
                                       (b"[" * 100000, "nested too deeply"),
                                       (b'{"lock_version": 1, "libtorch": {"k": 5}}', 'entry "k" is a number')])
def test_lock_files_with_bad_bytes_or_types(server, tmp_path, raw, says):
    serve(server, tmp_path)
    (tmp_path / "libtorch.lock").write_bytes(raw)
    r = doctor(tmp_path, *base_args(server, tmp_path))
    assert clean_error(r) and says in r.stderr, r.output
    assert (tmp_path / "libtorch.lock").read_bytes() == raw


class GzipAnyway:
    """A real server that compresses the zip with gzip although asked for identity."""

    def __init__(self, data: bytes) -> None:
        self.accept: list[str | None] = []
        outer = self
        body = gzip.compress(data)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.accept.append(self.headers.get("Accept-Encoding"))
                self.send_response(200)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (ConnectionResetError, BrokenPipeError):
                    # The doctor hung up mid-body (its disk is full): socketserver's traceback on
                    # stderr, which the in-process runner captures, would read as the doctor's own.
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_server_that_gzips_anyway(tmp_path):
    data = libtorch_zip(tmp_path / "src.zip", payload=256 << 10).read_bytes()
    srv = GzipAnyway(data)
    try:
        r = doctor(tmp_path, "fetch-libtorch", "--url", srv.base + "/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
                   "--allow-http", "--dest", str(tmp_path / "dest"), "--no-lock")
        assert r.exit_code == 0, r.output
        assert "compressed the answer (gzip)" in r.stderr
        assert srv.accept == ["identity"]
        record = json.loads((tmp_path / "dest/torch-doctor.json").read_text())
        assert record["sha256"] == hashlib.sha256(data).hexdigest() and record["size"] == len(data)
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


def test_offline_with_archive_installs(tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = doctor(tmp_path, "fetch-libtorch", "--offline", "--archive", str(z), "--dest", str(tmp_path / "dest"),
               "--lock", str(tmp_path / "libtorch.lock"), "-q")
    assert r.exit_code == 0 and "Installed libtorch 2.13.0+cpu" in r.stdout, r.output


def test_cache_key_with_an_http_mirror(tmp_path):
    plain = doctor(tmp_path, "cache-key", "--version", "2.13.0", "--variant", "cpu", "--platform", "linux-x86_64")
    env = hermetic_env(tmp_path, DOCTOR_LIBTORCH_MIRROR="http://mirror.internal/libtorch")
    r = doctor(tmp_path, "cache-key", "--version", "2.13.0", "--variant", "cpu", "--platform", "linux-x86_64", env=env)
    assert plain.exit_code == 0 and r.exit_code == 0, r.output
    assert r.stdout == plain.stdout and r.stdout.startswith("libtorch-2.13.0-cpu-cxx11-linux-x86_64-")


def deep_tree(root: Path, depth: int) -> None:
    """`depth` nested directories, made with relative paths (no long absolute path needed)."""
    import os

    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            new = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
        with open(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as fh:
            fh.write("leaf")
    finally:
        os.close(fd)


def test_very_deep_tree_hashes_and_removes_without_recursion(tmp_path):
    import sys

    depth = sys.getrecursionlimit() + 500
    try:
        deep_tree(tmp_path / "deep", depth)
        assert nar_hash(tmp_path / "deep").startswith("sha256-")
        rmtree(tmp_path / "deep")
        assert not (tmp_path / "deep").exists()
    finally:
        rmtree(tmp_path / "deep")  # pytest's own clean-up of old temp dirs recurses: leave nothing deep


def test_deep_zip_is_unpacked_or_refused_cleanly(tmp_path):
    z = tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    libtorch_zip(z)
    with zipfile.ZipFile(z, "a") as zf:
        zf.writestr(zinfo("libtorch/share/" + "d/" * 1500 + "f", 0o100644), b"x")  # 3000-byte path
    try:
        r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "dest"), "--no-lock", "-q")
        assert r.exit_code == 0, r.output
        r = doctor(tmp_path, "fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "dest"), "--no-lock",
                   "--verify", "-q")
        assert r.exit_code == 0, r.output
    finally:
        rmtree(tmp_path / "dest")  # pytest's own clean-up of old temp dirs recurses: leave nothing deep


def test_disk_full_during_a_download_of_unknown_size(tmp_path):
    """A gzip answer has no usable length, so no free-space check can run first: the disk
    fills while the bytes arrive, for real."""
    data = libtorch_zip(tmp_path / "src.zip", payload=6 << 20).read_bytes()
    srv = GzipAnyway(data)
    try:
        with tmpfs(tmp_path / "full", "2m") as mnt:
            r = doctor(tmp_path, "fetch-libtorch", "--url", srv.base + "/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
                       "--allow-http", "--dest", str(mnt / "dest"), "--no-lock", "-q")
            assert clean_error(r) and "No space left on device" in r.stderr, r.output
            assert not (mnt / "dest").exists()
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()
