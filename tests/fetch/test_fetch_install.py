"""fetch-libtorch end to end against a local server: install, record, lock, refusals, and the
promise that a failed fetch leaves an existing install exactly as it was."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from testsupport.fetch_helpers import DoctorMain, doctor_env, libtorch_zip, nix_hash_sri, run_doctor, tree_listing
from testsupport.support import as_another_user, world_tmp_dir

from doctor.fetch.record import read_install_record

NAME = "/cpu/libtorch-shared-with-deps-2.13.0+cpu.zip"


def cli(*args, env=None):
    """`doctor fetch-libtorch ARGS` in process, through doctor.cli.main (errors → exit codes),
    with stdout and stderr apart."""
    return CliRunner().invoke(DoctorMain("fetch-libtorch"), list(args), env=env, catch_exceptions=False)


def serve(server, tmp_path, name=NAME, **kw) -> tuple[Path, bytes]:
    z = libtorch_zip(tmp_path / "src.zip", **kw)
    data = z.read_bytes()
    server.add(name, data)
    return z, data


def args(server, tmp_path, *extra):
    lock = [] if "--no-lock" in extra else ["--lock", str(tmp_path / "libtorch.lock")]
    return ["--mirror", server.base, "--allow-http", "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(tmp_path / "dest"), *lock, "--backoff", "0.01", *extra]


def snapshot(dest: Path):
    return tree_listing(dest), (dest / "torch-doctor.json").read_text()


def no_leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if ".staging-" in p.name or ".old-" in p.name or ".wheel-" in p.name)


def test_install_record_marker_lock_and_tree_like_unzip(server, tmp_path):
    z, data = serve(server, tmp_path)
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 0, r.output
    assert "Installed libtorch 2.13.0+cpu (cxx11 ABI, linux-x86_64)" in r.stdout
    assert f'Next: eval "$(doctor emit setenv --libtorch {tmp_path / "dest"})"' in r.stdout
    assert "hashes recorded in" in r.stdout
    dest = tmp_path / "dest"
    rec = read_install_record(dest)
    assert rec["version"] == "2.13.0" and rec["variant"] == "cpu" and rec["abi"] == "cxx11"
    assert rec["platform"] == "linux-x86_64" and rec["source"]["kind"] == "url"
    assert rec["source"]["url"] == server.url("/cpu/libtorch-shared-with-deps-2.13.0%2Bcpu.zip")
    assert rec["source"]["file"] == "libtorch-shared-with-deps-2.13.0+cpu.zip"
    assert rec["size"] == len(data) and rec["installed_at"].endswith("Z") and rec["doctor_version"]
    assert (dest / ".ok").is_file()
    # the same tree unzip makes, and the NAR hash Nix computes for it
    subprocess.run(["unzip", "-q", str(z), "-d", str(tmp_path / "u")], check=True)
    mine = [row for row in tree_listing(dest) if row[0] not in ("torch-doctor.json", ".ok")]
    assert mine == tree_listing(tmp_path / "u/libtorch")
    assert rec["nar_hash"] == nix_hash_sri(tmp_path / "u/libtorch")
    lock = json.loads((tmp_path / "libtorch.lock").read_text())
    entry = lock["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]
    assert entry["sha256"] == rec["sha256"] and entry["nar_hash"] == rec["nar_hash"] and entry["size"] == len(data)
    assert no_leftovers(tmp_path) == [] and not list(tmp_path.glob(".dest*.part*"))


def test_already_installed_does_nothing(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    before = len(server.requests)
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 0
    assert "is already installed (checked against its install record and" in r.stdout
    assert "nothing to do" in r.stdout and "Next:" in r.stdout
    assert len(server.requests) == before


def test_wrong_sha256_rejected_existing_install_intact(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    before = snapshot(tmp_path / "dest")
    serve(server, tmp_path, seed=1)  # a different file behind the same URL
    r = cli(*args(server, tmp_path, "--force", "--sha256", "0" * 64))
    assert r.exit_code == 1
    assert f"expected {'0' * 64} (--sha256), got " in r.stderr
    assert "hint: nothing was installed; the archive is not the file --sha256 names" in r.stderr
    assert "--update-lock" not in r.stderr  # the lock plays no part in this mismatch
    assert snapshot(tmp_path / "dest") == before
    assert no_leftovers(tmp_path) == [] and not list(tmp_path.glob(".dest*.part*"))  # bad bytes not kept


def test_lock_trust_on_first_use_then_mismatch_then_update(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    first = json.loads((tmp_path / "libtorch.lock").read_text())
    before = snapshot(tmp_path / "dest")
    _, data2 = serve(server, tmp_path, seed=2)  # replaced in place upstream
    r = cli(*args(server, tmp_path, "--force"))
    assert r.exit_code == 1
    assert "sha256 mismatch for libtorch-shared-with-deps-2.13.0+cpu.zip" in r.stderr
    assert first["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]["sha256"] in r.stderr  # both hashes shown
    assert "(then --update-lock re-records it)" in r.stderr
    assert snapshot(tmp_path / "dest") == before
    assert json.loads((tmp_path / "libtorch.lock").read_text()) == first
    r = cli(*args(server, tmp_path, "--force", "--update-lock"))
    assert r.exit_code == 0, r.stderr
    assert "entry updated in" in r.stdout
    import hashlib

    assert json.loads((tmp_path / "libtorch.lock").read_text())["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]["sha256"] \
        == hashlib.sha256(data2).hexdigest()


def test_lock_nar_hash_checked_for_a_repacked_archive(server, tmp_path):
    """Same version from a mirror that repacked the zip: the archive sha256 differs and the lock
    says so before anything is unpacked; --sha256 of the new file alone is not enough."""
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    serve(server, tmp_path, extra=[("libtorch/lib/extra.so", 0o100755, b"x")])
    r = cli(*args(server, tmp_path, "--force"))
    assert r.exit_code == 1 and "mismatch" in r.stderr


def test_truncated_body_rejected_existing_install_intact(server, tmp_path):
    _, data = serve(server, tmp_path, payload=300_000)
    assert cli(*args(server, tmp_path)).exit_code == 0
    before = snapshot(tmp_path / "dest")
    serve(server, tmp_path, payload=300_000, seed=3)
    server.script(NAME, [("cut", 150_000)] * 5)
    r = cli(*args(server, tmp_path, "--force", "--no-lock", "--retries", "2"))
    assert r.exit_code == 1
    assert "download failed after" in r.stderr and "connection closed after" in r.stderr
    assert snapshot(tmp_path / "dest") == before
    assert no_leftovers(tmp_path) == []


def test_404_fails_at_once(server, tmp_path):
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 1
    assert "not found (HTTP 404)" in r.stderr
    assert len(server.requests) == 1
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("evil", [("libtorch/../../escaped", 0o100644, b"x"),
                                  ("libtorch/lib/l", 0o120777, b"../../../../escaped")])
def test_malicious_archive_refused_existing_install_intact(server, tmp_path, evil):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    before = snapshot(tmp_path / "dest")
    serve(server, tmp_path, extra=[evil])
    r = cli(*args(server, tmp_path, "--force", "--no-lock"))
    assert r.exit_code == 1 and "refusing to unpack this archive" in r.stderr
    assert snapshot(tmp_path / "dest") == before
    assert not list(tmp_path.rglob("escaped")) and not (tmp_path.parent / "escaped").exists()
    assert no_leftovers(tmp_path) == []


def test_archive_of_another_version_or_abi_refused(server, tmp_path):
    serve(server, tmp_path, version="2.12.0")
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 1 and "holds libtorch 2.12.0+cpu (its build-version), not 2.13.0" in r.stderr
    assert not (tmp_path / "dest").exists()
    assert not list(tmp_path.glob(".dest*.part*"))  # complete but wrong: nothing kept to resume from
    name = "/cpu/libtorch-cxx11-abi-shared-with-deps-2.6.0+cpu.zip"
    serve(server, tmp_path, name=name, version="2.6.0", abi_line="0")
    r = cli("--mirror", server.base, "--allow-http", "--version", "2.6.0", "--variant", "cpu",
            "--dest", str(tmp_path / "d26"), "--no-lock")
    assert r.exit_code == 1 and "is a pre-cxx11 ABI build (TorchConfig.cmake), not cxx11" in r.stderr


def test_verify_rehashes_and_catches_a_modified_tree(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    r = cli(*args(server, tmp_path, "--verify"))
    assert r.exit_code == 0 and "re-hashed, matches its install record" in r.stdout
    (tmp_path / "dest/include/c10/macros/Macros.h").write_text("tampered\n")
    r = cli(*args(server, tmp_path, "--verify"))
    assert r.exit_code == 1 and f"the installed tree at {tmp_path / 'dest'} has changed" in r.stderr
    assert "archive" not in r.stderr.split("error:", 1)[1]  # speaks of the tree, not of an archive


def nar_without_record(dest: Path, copy: Path) -> bytes:
    """`nix-store --dump` of the installed tree less the record and marker (what the hashes cover)."""
    shutil.copytree(dest, copy, symlinks=True)
    (copy / "torch-doctor.json").unlink()
    (copy / ".ok").unlink()
    return subprocess.run(["nix-store", "--dump", str(copy)], capture_output=True, check=True).stdout


def test_verify_checks_the_recorded_parts_and_names_the_file_that_changed(server, tmp_path):
    """The record holds the sha256 of each 4 MiB of the tree's NAR (slices of Nix's own NAR);
    --verify checks them and names the files of the first part that differs; a record written
    without parts (an earlier doctor) is still verified against its NAR hash."""
    import hashlib

    serve(server, tmp_path, payload=9 << 20)  # libc10.so spans three parts
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    dest = tmp_path / "dest"
    record_file = dest / "torch-doctor.json"
    rec = json.loads(record_file.read_text())
    dump = nar_without_record(dest, tmp_path / "copy")
    size = 4 << 20
    assert rec["nar_parts"] == {"size": size, "sha256": [hashlib.sha256(dump[i:i + size]).hexdigest()
                                                          for i in range(0, len(dump), size)]}
    assert len(rec["nar_parts"]["sha256"]) == 3 and rec["nar_hash"] == nix_hash_sri(tmp_path / "copy")
    lib = dest / "lib/libc10.so"
    original = lib.read_bytes()
    with open(lib, "r+b") as f:  # one byte, same size, same mtime a second later or not: only the bytes tell
        f.seek(5 << 20)
        f.write(bytes([original[5 << 20] ^ 1]))
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 1, r.stderr
    assert (f"error: the installed tree at {dest} has changed: 1 of 3 parts of its NAR differs from its install "
            f"record torch-doctor.json; the first holds lib/libc10.so\n") in r.stderr
    lib.write_bytes(original)
    assert cli(*args(server, tmp_path, "--no-lock", "--verify")).exit_code == 0
    (dest / "share/cmake/Torch/TorchConfig.cmake").unlink()  # the NAR ends earlier: every part after shifts
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 1 and "parts of its NAR differ" in r.stderr and "lib/libc10.so" in r.stderr
    shutil.rmtree(dest)
    shutil.copytree(tmp_path / "copy", dest, symlinks=True)
    del rec["nar_parts"]
    record_file.write_text(json.dumps(rec))
    (dest / ".ok").write_text("")
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 0 and "re-hashed, matches its install record" in r.stdout, r.stderr
    lib.write_bytes(original[:-1] + b"x")
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 1 and f"its NAR hash is sha256-" in r.stderr and f"says {rec['nar_hash']}" in r.stderr


def test_an_install_from_a_file_records_the_parts_an_install_while_downloading_does(server, tmp_path):
    """Two ways in (unpacked while downloading, unpacked from a zip on disk with --archive),
    one record: the same NAR hash and the same parts."""
    z, _ = serve(server, tmp_path, payload=9 << 20)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    local = ["--archive", str(z), "--version", "2.13.0", "--variant", "cpu", "--dest", str(tmp_path / "d2"), "--no-lock"]
    r = cli(*local)
    assert r.exit_code == 0, r.stderr
    streamed, unpacked = (json.loads((tmp_path / d / "torch-doctor.json").read_text()) for d in ("dest", "d2"))
    assert (unpacked["nar_hash"], unpacked["nar_parts"]) == (streamed["nar_hash"], streamed["nar_parts"])
    assert len(streamed["nar_parts"]["sha256"]) == 3


def test_verify_never_downloads_or_replaces(server, tmp_path):
    """--verify reports on what is installed: with nothing there it fetches nothing, and a tree of
    another version stays as it is (before: it was downloaded, or replaced)."""
    serve(server, tmp_path)
    r = cli(*args(server, tmp_path, "--verify"))
    assert r.exit_code == 1 and not (tmp_path / "dest").exists() and server.requests == []
    assert f"error: nothing to verify at {tmp_path / 'dest'}: no install record\n" in r.stderr
    assert cli(*args(server, tmp_path)).exit_code == 0
    before = snapshot(tmp_path / "dest")
    other = [a.replace("2.13.0", "2.12.0") for a in args(server, tmp_path, "--verify", "--no-lock")]
    r = cli(*other)
    assert r.exit_code == 1 and "the installed version is '2.13.0', not '2.12.0'" in r.stderr
    assert snapshot(tmp_path / "dest") == before and no_leftovers(tmp_path) == []


@pytest.mark.parametrize("damage, said", [
    (lambda f: f.write_text('{"record_version": 1, "version": '), "its torch-doctor.json is not valid JSON: Expecting value: line 1 column 34 (char 33)"),
    (lambda f: f.write_text("[" * 100_000 + "]" * 100_000), "its torch-doctor.json is nested too deeply to be a record"),
    (lambda f: f.write_bytes(b"\xff\xfe{}"), "its torch-doctor.json is not UTF-8 text"),
    (lambda f: f.write_text(" " * (1 << 20) + "{}"), "its torch-doctor.json is over 1 MiB"),
    (lambda f: f.write_text(json.dumps({"record_version": "x" * 5000})),
     "its torch-doctor.json is not one the doctor wrote: record_version is 'xxxx"),
    (lambda f: (f.unlink(), f.symlink_to(f.with_name("build-version"))), "its torch-doctor.json is a symlink"),
    (lambda f: (f.unlink(), f.mkdir()), "its torch-doctor.json is not a regular file"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "nar_parts": {"size": 3, "sha256": []}})),
     "its torch-doctor.json is not one the doctor wrote: nar_parts size '3' is not a power of two from 4 to 64 MiB"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "nar_parts": {"size": 4 << 20, "sha256": ["ab"]}})),
     "its torch-doctor.json is not one the doctor wrote: nar_parts holds 'ab', not 64 lowercase hex digits"),
])
def test_a_damaged_record_is_named_as_damaged_and_the_tree_kept(server, tmp_path, damage, said):
    """An installed tree whose torch-doctor.json was damaged afterwards: --verify and a plain
    fetch say what is wrong with the file (before: "no install record" beside the file, and
    "no torch-doctor.json and .ok"), the message stays one short line, nothing is replaced, and
    --force reinstalls."""
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    damage(tmp_path / "dest/torch-doctor.json")
    before = tree_listing(tmp_path / "dest")
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 1 and f"error: nothing to verify at {tmp_path / 'dest'}: {said}" in r.stderr, r.stderr
    assert "hint: add --force (without --verify) to reinstall it there" in r.stderr
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 1 and f"holds a libtorch that fetch-libtorch cannot vouch for: {said}" in r.stderr, r.stderr
    assert all(len(line) < 400 for line in r.stderr.splitlines())
    assert tree_listing(tmp_path / "dest") == before and no_leftovers(tmp_path) == []
    r = cli(*args(server, tmp_path, "--no-lock", "--force"))
    assert r.exit_code == 0 and read_install_record(tmp_path / "dest")["version"] == "2.13.0", r.stderr


@pytest.mark.parametrize("unmark", [
    lambda ok: ok.unlink(),
    lambda ok: (ok.unlink(), ok.symlink_to("build-version")),  # a plain file behind it, but not the doctor's marker
])
def test_a_tree_without_its_marker_is_not_taken_as_installed(server, tmp_path, unmark):
    """A record without its .ok marker, or with a symlink in the marker's place, vouches for
    nothing: not "already installed", --verify finds nothing to verify, a plain fetch refuses
    without first saying it is replacing the tree, nothing is replaced, and --force reinstalls."""
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    dest = tmp_path / "dest"
    unmark(dest / ".ok")
    before = tree_listing(dest)
    r = cli(*args(server, tmp_path, "--no-lock", "--verify"))
    assert r.exit_code == 1 and f"error: nothing to verify at {dest}: no .ok marker" in r.stderr, r.stderr
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 1 and "already installed" not in r.stdout, r.stdout
    assert f"error: {dest} holds a libtorch that fetch-libtorch cannot vouch for: no .ok marker" in r.stderr
    assert "replacing" not in r.stderr, r.stderr
    assert tree_listing(dest) == before and no_leftovers(tmp_path) == []
    r = cli(*args(server, tmp_path, "--no-lock", "--force"))
    assert r.exit_code == 0 and (dest / ".ok").is_file() and not (dest / ".ok").is_symlink(), r.stderr


def test_verify_names_the_file_this_user_may_not_read(server, tmp_path):
    """A tree installed by root and closed to others (umask 077): --verify by another user says
    which file and that it is a permission, not a changed tree, and offers no other --dest."""
    serve(server, tmp_path)
    top = world_tmp_dir("verify-denied-")
    try:
        dest = top / "dest"
        r = cli(*args(server, tmp_path, "--no-lock", "--dest", str(dest)))
        assert r.exit_code == 0, r.stderr
        header = dest / "include/c10/macros/Macros.h"
        header.chmod(0o600)
        verify = [*args(server, tmp_path, "--no-lock", "--dest", str(dest)), "--verify"]
        code, err = as_another_user(lambda: (lambda r: (r.exit_code, r.stderr))(cli(*verify)))
    finally:
        shutil.rmtree(top)
    assert code == 1, err
    assert f"error: cannot read the installed tree at {dest}: {header}: Permission denied" in err
    assert f"hint: no permission to read {header}: fix its permissions" in err and "--dest" not in err.split("hint:")[1]


PORTAL = (b"<!DOCTYPE html>\n<html><head><title>Network login</title></head>"
          b"<body>Sign in to continue to the internet.</body></html>\n")


def test_a_proxy_login_page_in_place_of_the_zip_is_named_as_such(server, tmp_path):
    """A captive portal or corporate proxy answers 200 with its login page: said before any byte is
    kept; and the same page saved by `wget` and given as --archive is named for what it is."""
    serve(server, tmp_path)
    server.script(NAME, [("page", PORTAL)])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 1
    assert (f"error: {server.url(NAME).replace('+', '%2B')} answered with a web page (Content-Type text/html), "
            "not a zip archive") in r.stderr and "captive portal" in r.stderr
    assert not (tmp_path / "dest").exists() and not list(tmp_path.glob(".dest.*.part*"))
    saved = tmp_path / "libtorch.zip"
    saved.write_bytes(PORTAL)
    sha = __import__("hashlib").sha256(PORTAL).hexdigest()
    r = cli("--archive", str(saved), "--sha256", sha, "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(tmp_path / "dest"), "--no-lock")
    assert r.exit_code == 1 and "error: libtorch.zip is a web page (HTML), not a zip archive" in r.stderr, r.stderr
    assert not (tmp_path / "dest").exists()


def test_a_proxy_intercepting_https_is_a_tls_error_whose_hint_works(tmp_path):
    """A server presenting a CA the system does not trust (a proxy that intercepts HTTPS): exit 1
    naming TLS and the variable to set; with REQUESTS_CA_BUNDLE naming that CA, the fetch works."""
    from testsupport.fetch_helpers import TLS, Server

    https = Server(tls=True)
    try:
        serve(https, tmp_path)
        r = cli(*args(https, tmp_path, "--no-lock"))
        assert r.exit_code == 1 and "error: TLS error talking to 127.0.0.1" in r.stderr, r.stderr
        assert "export REQUESTS_CA_BUNDLE=/path/to/its-ca.pem" in r.stderr
        assert not (tmp_path / "dest").exists()
        r = cli(*args(https, tmp_path, "--no-lock"), env={"REQUESTS_CA_BUNDLE": str(TLS / "proxy-ca.pem")})
        assert r.exit_code == 0, r.stderr
        assert read_install_record(tmp_path / "dest")["version"] == "2.13.0"
    finally:
        https.close()


def test_an_unreachable_proxy_is_named_with_its_variables_not_retried(tmp_path):
    """HTTP_PROXY naming a port nobody listens on: one clear error naming the proxy (its password
    redacted) and the variables, at once, instead of retries ending in requests' own text."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when this block ends: nobody listens there
    proxy = f"http://user:secret@127.0.0.1:{port}"
    env = {"HTTP_PROXY": proxy, "http_proxy": proxy, "NO_PROXY": "", "no_proxy": "", "ALL_PROXY": None, "all_proxy": None}
    r = cli("--mirror", "http://libtorch.example.invalid", "--allow-http", "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(tmp_path / "dest"), "--no-lock", "--backoff", "0.01", env=env)
    assert r.exit_code == 1
    assert (f"error: cannot reach the proxy http://***@127.0.0.1:{port} that the environment sets for "
            "libtorch.example.invalid") in r.stderr and "secret" not in r.stderr
    assert "retrying" not in r.stderr and "HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY" in r.stderr


@pytest.mark.parametrize("code, final", [(socket.EAI_NONAME, True), (socket.EAI_AGAIN, False)])
def test_a_name_that_does_not_resolve_is_said_at_once_and_a_temporary_failure_retried(tmp_path, monkeypatch, code, final):
    """An offline machine (or a typo in --mirror): 'cannot resolve HOST' at once, not 31 s of
    retries ending in urllib3's text; 'Temporary failure in name resolution' is retried. The
    resolver is made to answer as glibc does; requests and urllib3 wrap it as they really do."""
    def resolver(host, *args, **kw):
        raise socket.gaierror(code, "Name or service not known" if final else "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    r = cli("--mirror", "http://libtorch.example.invalid", "--allow-http", "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(tmp_path / "dest"), "--no-lock", "--retries", "2", "--backoff", "0.01")
    assert r.exit_code == 1
    if final:
        assert "error: cannot resolve libtorch.example.invalid: Name or service not known" in r.stderr
        assert "retrying" not in r.stderr and "--archive" in r.stderr
    else:
        assert r.stderr.count("cannot resolve libtorch.example.invalid (a temporary failure); retrying") == 2
        assert "error: download failed after 3 attempts: cannot resolve libtorch.example.invalid (a temporary failure)" in r.stderr


def test_refuses_to_replace_a_directory_that_is_not_libtorch(server, tmp_path):
    serve(server, tmp_path)
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest/thesis.tex").write_text("years of work")
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 1 and "refusing to replace" in r.stderr and "thesis.tex" in r.stderr
    assert (tmp_path / "dest/thesis.tex").read_text() == "years of work"


def test_offline(server, tmp_path):
    serve(server, tmp_path)
    r = cli(*args(server, tmp_path, "--offline"))
    assert r.exit_code == 1 and "--offline forbids downloading" in r.stderr and server.requests == []
    assert cli(*args(server, tmp_path)).exit_code == 0
    assert cli(*args(server, tmp_path, "--offline")).exit_code == 0


def test_local_archive_and_url_beyond_the_table(server, tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.14.0+cu140.zip", version="2.14.0", variant="cu140")
    r = cli("--archive", str(z), "--dest", str(tmp_path / "a"), "--no-lock")
    assert r.exit_code == 0, r.stderr
    rec = read_install_record(tmp_path / "a")
    assert (rec["version"], rec["variant"], rec["source"]["kind"]) == ("2.14.0", "cu140", "archive")
    server.add("/custom/build.zip", libtorch_zip(tmp_path / "b.zip", version="2.14.0", variant="cu140").read_bytes())
    r = cli("--url", server.url("/custom/build.zip"), "--allow-http", "--version", "2.14.0", "--variant", "cu140",
            "--dest", str(tmp_path / "b"), "--no-lock")
    assert r.exit_code == 0, r.stderr
    assert read_install_record(tmp_path / "b")["source"]["url"] == server.url("/custom/build.zip")


def test_a_damaged_archive_is_named_as_such_not_the_destination(tmp_path):
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    z.write_bytes(z.read_bytes()[100:])
    r = cli("--archive", str(z), "--dest", str(tmp_path / "a"), "--no-lock", "--json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["error"]["id"] == "fetch.bad-archive"
    assert "error: the archive is damaged" in r.stderr and "hint: " in r.stderr
    assert str(tmp_path) not in r.stderr.split("error:", 1)[1] and not (tmp_path / "a").exists()


@pytest.mark.parametrize("blocker", ["dir", "symlink"])
def test_an_archive_that_cannot_be_kept_is_a_warning_after_a_good_install(server, tmp_path, blocker):
    """The install succeeded: it once ended exit 1, with its lock entry not recorded and the
    whole .part and its resume note left beside the destination for good."""
    serve(server, tmp_path)
    kept = tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    if blocker == "dir":
        kept.mkdir()
    else:
        kept.symlink_to(tmp_path / "elsewhere.zip")
    r = cli(*args(server, tmp_path, "--keep-archive"))
    assert r.exit_code == 0, r.output
    assert f"warning: did not keep the archive: {kept} exists and is not a plain file" in r.stderr
    assert "hashes recorded in" in r.stdout
    assert "2.13.0/linux-x86_64/cpu/cxx11" in json.loads((tmp_path / "libtorch.lock").read_text())["libtorch"]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".part", ".part.json"))]
    assert (kept.is_dir() and not any(kept.iterdir())) if blocker == "dir" else not kept.exists()


def test_a_lock_file_inside_the_destination_is_refused_before_anything_is_written(tmp_path):
    """Inside the tree, the lock was installed over (--verify then found the tree changed) and
    --force deleted it with the old tree."""
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    dest = tmp_path / "D"
    r = run_doctor("fetch-libtorch", "--archive", str(z), "--dest", str(dest), "--lock", str(dest / "libtorch.lock"),
                   cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"error: the lock file {dest / 'libtorch.lock'} is inside the destination {dest}" in r.stderr
    assert "hint: " in r.stderr and not dest.exists()
    assert run_doctor("fetch-libtorch", "--archive", str(z), "--dest", str(dest), "--no-lock", cwd=tmp_path).returncode == 0
    before = tree_listing(dest)
    for extra in ((), ("--force",), ("--verify",)):  # the default ./libtorch.lock, run from inside the tree
        r = run_doctor("fetch-libtorch", "--archive", str(z), "--dest", str(dest), *extra, cwd=dest / "lib")
        assert r.returncode == 2 and "is inside the destination" in r.stderr, r.stderr
    assert tree_listing(dest) == before


def test_a_size_the_lock_disagrees_with_is_an_error_with_a_hint(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path)).exit_code == 0
    lock = tmp_path / "libtorch.lock"
    data = json.loads(lock.read_text())
    data["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]["size"] += 1
    lock.write_text(json.dumps(data))
    r = cli(*args(server, tmp_path, "--force"))
    assert r.exit_code == 1
    assert "error: size mismatch:" in r.stderr and "hint: nothing was installed" in r.stderr, r.stderr


def test_json_output(server, tmp_path):
    serve(server, tmp_path)
    r = cli(*args(server, tmp_path, "--json", "-q"))
    assert r.exit_code == 0 and r.stderr == ""
    out = json.loads(r.stdout)
    assert out["action"] == "installed" and out["lock"] == "recorded"
    assert out["record"]["nar_hash"].startswith("sha256-") and out["plan"]["version"] == "2.13.0"
    out = json.loads(cli(*args(server, tmp_path, "--json")).stdout)
    assert out["action"] == "already-installed" and out["lock"] == "verified"


def test_emit_after_install(server, tmp_path):
    serve(server, tmp_path)
    r = cli(*args(server, tmp_path, "--emit", "setenv"), env={"SHELL": "/bin/bash"})
    assert r.exit_code == 0, r.stderr
    assert "Installed libtorch" in r.stderr and "Installed" not in r.stdout
    assert str(tmp_path / "dest") in r.stdout and "LD_LIBRARY_PATH" in r.stdout


def test_the_fetch_fix_sets_the_shell_up_for_the_tree_it_installs(server, tmp_path):
    """A LIBTORCH at a broken tree: the check's fix, pasted into bash (pointed at the test's
    mirror), leaves LIBTORCH at the tree it installed. `fetch-libtorch && eval "$(doctor emit
    setenv)"` set the shell up for the active tree again: the broken one LIBTORCH still named."""
    from testsupport.support import make_tree

    from doctor.fixes import FETCH

    serve(server, tmp_path)
    broken = make_tree(tmp_path / "broken", "2.13.0", "cpu")  # its libc10.so is an empty file
    home = tmp_path / "cache"
    env = doctor_env(LIBTORCH=str(broken), LIBTORCH_HOME=str(home), HOME=str(tmp_path))
    report = json.loads(run_doctor("check", "--json", cwd=tmp_path, env=env).stdout)
    fix = next(f["fix"] for f in report["findings"] if f["id"] == "libtorch.path-invalid")
    assert fix.endswith(FETCH), fix
    pasted = FETCH.replace("doctor fetch-libtorch", f"{sys.executable} -m doctor fetch-libtorch --mirror {server.base} "
                           "--allow-http --no-lock --variant cpu")
    shell = subprocess.run(["bash", "-c", f'{pasted}; printf %s "$LIBTORCH"'], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=120)
    assert shell.stdout == str(home / "2.13.0/linux-x86_64/cpu"), shell.stderr


def test_default_destination_is_hasktorch_cache_layout(server, tmp_path):
    serve(server, tmp_path)
    home = tmp_path / "home"
    r = run_doctor("fetch-libtorch", "--mirror", server.base, "--allow-http", "--version", "2.13.0",
                   "--variant", "cpu", cwd=tmp_path, env=doctor_env(LIBTORCH_HOME=str(home)))
    assert r.returncode == 0, r.stderr
    dest = home / "2.13.0/linux-x86_64/cpu"
    assert (dest / ".ok").is_file() and read_install_record(dest)["version"] == "2.13.0"
    assert (tmp_path / "libtorch.lock").is_file()  # the lock defaults to the current directory
    xdg = tmp_path / "xdg"
    r = run_doctor("fetch-libtorch", "--dry-run", "--json", "--version", "2.13.0", "--variant", "cpu",
                   cwd=tmp_path, env=doctor_env(XDG_CACHE_HOME=str(xdg)))
    assert json.loads(r.stdout)["plan"]["dest"] == str(xdg / "libtorch/2.13.0/linux-x86_64/cpu")


def test_two_concurrent_fetches_end_with_one_valid_install(server, tmp_path):
    _, data = serve(server, tmp_path, payload=400_000)
    server.slow[NAME] = 1.0  # long enough for the second process to arrive while the first works
    procs = [subprocess.Popen([sys.executable, "-m", "doctor", "fetch-libtorch", *args(server, tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=doctor_env()) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stdout = "".join(o[0] for o in outs)
    assert stdout.count("Installed libtorch") == 1 and stdout.count("already installed") == 1
    assert len([r for r in server.gets(NAME) if r is None]) == 1  # downloaded once
    rec = read_install_record(tmp_path / "dest")
    import hashlib

    assert rec["sha256"] == hashlib.sha256(data).hexdigest()
    assert no_leftovers(tmp_path) == []


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "Interrupted."),
                                              (signal.SIGTERM, 143, "Terminated (SIGTERM)."),
                                              (signal.SIGHUP, 129, "Terminated (SIGHUP).")])
def test_interrupted_fetch_leaves_the_install_untouched_and_resumes(server, tmp_path, sig, code, said):
    """Ctrl-C, and SIGTERM (a cancelled CI job, `timeout`, `docker stop`) or SIGHUP (the terminal
    closed), which used to kill the process on the spot with the staging tree left behind."""
    serve(server, tmp_path, payload=600_000)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    before = snapshot(tmp_path / "dest")
    _, data = serve(server, tmp_path, payload=600_000, seed=5)
    server.slow[NAME] = 4.0
    p = subprocess.Popen([sys.executable, "-m", "doctor", "fetch-libtorch", *args(server, tmp_path, "--force", "--no-lock")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=doctor_env())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        parts = [x for x in tmp_path.glob(".dest.*.part") if x.stat().st_size > 100_000]
        if parts:
            break
        time.sleep(0.05)
    assert parts, "the download never started"
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob(".dest.staging-*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the streaming unpack has started: there is a half-written tree to remove
    assert list(tmp_path.glob(".dest.staging-*")), "the unpack never started"
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == code and err.splitlines()[-1] == said, err
    assert snapshot(tmp_path / "dest") == before
    assert no_leftovers(tmp_path) == []
    server.slow[NAME] = 0
    r = cli(*args(server, tmp_path, "--force", "--no-lock"))
    assert r.exit_code == 0, r.stderr
    assert "resuming a partial download" in r.stderr
    assert server.gets(NAME)[-1].startswith("bytes=")
    import hashlib

    assert read_install_record(tmp_path / "dest")["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_file_system_without_locks_installs_unguarded_and_says_so(server, tmp_path, monkeypatch):
    """flock on an NFS home without a lock daemon fails with ENOLCK ("No locks available"), on some
    FUSE and SMB mounts with EOPNOTSUPP: the fetch goes on, says so, and leaves alone the staging
    trees it cannot know to be dead."""
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    serve(server, tmp_path)
    other = tmp_path / ".dest.staging-of-another-fetch"
    other.mkdir()
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.stderr
    assert (f"note: the file system holding {tmp_path} gives no file locks (NFS without a lock daemon, some FUSE or "
            f"SMB mounts): installing without the install lock, so run no other fetch into {tmp_path / 'dest'} "
            "meanwhile") in r.stderr
    assert read_install_record(tmp_path / "dest")["version"] == "2.13.0" and other.is_dir()


def test_lock_recorded_from_an_existing_install_without_downloading(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    requests = len(server.requests)
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 0 and "already installed" in r.stdout and "hashes recorded in" in r.stdout
    assert len(server.requests) == requests
    entry = json.loads((tmp_path / "libtorch.lock").read_text())["libtorch"]["2.13.0/linux-x86_64/cpu/cxx11"]
    assert entry["nar_hash"] == read_install_record(tmp_path / "dest")["nar_hash"]
    r = cli(*args(server, tmp_path))
    assert "matches" in r.stdout and "and " + str(tmp_path / "libtorch.lock") in r.stdout


def test_installed_tree_disagreeing_with_the_lock_is_refetched(server, tmp_path):
    serve(server, tmp_path)
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    lock = tmp_path / "libtorch.lock"
    lock.write_text(json.dumps({"lock_version": 1, "libtorch": {"2.13.0/linux-x86_64/cpu/cxx11": {
        "sha256": "1" * 64, "nar_hash": "sha256-" + "A" * 43 + "=", "size": 1}}}))
    before = snapshot(tmp_path / "dest")
    r = cli(*args(server, tmp_path))
    # the tree does not match the lock, so it is fetched again, and the download does not either
    assert r.exit_code == 1 and "reinstalling: the installed tree's NAR hash differs" in r.stderr
    assert "sha256 mismatch" in r.stderr
    assert snapshot(tmp_path / "dest") == before
