"""`sudo doctor fetch-libtorch`: a note when the tree lands where the user's builds cannot use it."""

from __future__ import annotations

import hashlib
import os
import pwd
from pathlib import Path, PurePath

from click.testing import CliRunner
from testsupport.fetch_helpers import DoctorMain, libtorch_zip

from doctor.fetch.sudo import sudo_note
from doctor.host import Host

HOME, ROOT = PurePath("/home/alice"), PurePath("/root")


def test_the_note_names_the_place_and_what_goes_wrong():
    in_root = sudo_note("alice", HOME, ROOT, ROOT / ".cache/libtorch/2.13.0/linux-x86_64/cpu")
    assert in_root == ("note: running as root through sudo (SUDO_USER=alice): /root/.cache/libtorch/2.13.0/linux-x86_64/cpu"
                       " is in root's home, where alice's builds and `doctor check` do not look; run this without sudo, "
                       "or give --dest a folder alice can read")
    in_user = sudo_note("alice", HOME, ROOT, HOME / ".cache/libtorch/2.13.0/linux-x86_64/cpu")
    assert in_user is not None and "/home/alice/.cache/libtorch/2.13.0/linux-x86_64/cpu will belong to root" in in_user
    assert sudo_note("alice", HOME, ROOT, PurePath("/opt/libtorch")) is None  # a system-wide install is what sudo is for
    assert sudo_note("alice", None, None, ROOT / "x") is None
    assert sudo_note("alice", HOME, ROOT, PurePath("/home/alice2/lt")) is None  # a prefix of the name is not the folder


def test_host_knows_when_it_runs_as_root_through_sudo(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    nobody = pwd.getpwnam("nobody").pw_dir
    assert Host(env={"SUDO_USER": "nobody"}).sudo_user() == ("nobody", Path(nobody), Path(pwd.getpwuid(0).pw_dir))
    assert Host(env={"SUDO_USER": "no-such-user-here"}).sudo_user() == ("no-such-user-here", None, Path(pwd.getpwuid(0).pw_dir))
    assert Host(env={}).sudo_user() is None
    assert Host(env={"SUDO_USER": "root"}).sudo_user() is None  # `sudo -s` from a root shell
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert Host(env={"SUDO_USER": "nobody"}).sudo_user() is None  # sudo -u alice: not root


def test_fetch_under_sudo_says_so_and_installs_anyway(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setattr(Host, "sudo_user", lambda self: ("alice", home, Path("/root")))
    archive = libtorch_zip(tmp_path / "lt.zip")
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    common = ["--archive", str(archive), "--sha256", sha, "--no-lock", "--version", "2.13.0", "--variant", "cpu"]
    env = {"LIBTORCH_HOME": str(home / ".cache/libtorch")}
    r = CliRunner().invoke(DoctorMain("fetch-libtorch"), common, env=env, catch_exceptions=False)
    dest = home / ".cache/libtorch/2.13.0/linux-x86_64/cpu"
    assert r.exit_code == 0, r.stderr
    assert r.stderr.splitlines()[0] == (f"note: running as root through sudo (SUDO_USER=alice): {dest} will belong to root, "
                                        "and alice cannot update or remove it without sudo; run this without sudo")
    assert (dest / "torch-doctor.json").is_file()
    elsewhere = CliRunner().invoke(DoctorMain("fetch-libtorch"), [*common, "--dest", str(tmp_path / "opt")], env=env,
                                   catch_exceptions=False)
    assert elsewhere.exit_code == 0 and "note:" not in elsewhere.stderr
