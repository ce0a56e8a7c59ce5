"""The write side of the Host door (doctor/writes.py): atomic replace, append, create-new, the
root mapping reads use, and one translation of the world's errors into `error:` + `hint:`.

Real files, real symlinks and real FIFOs under a Host over a temporary root."""

from __future__ import annotations

import os
import stat

import pytest

from testsupport.support import FULL_DEVICE, make_device

from doctor.errors import DoctorError
from doctor.host import Host


def test_write_atomic_maps_through_the_root_and_creates_parents(tmp_path):
    host = Host.for_test(tmp_path)
    host.write_atomic("/proj/sub/setenv.sh", "export A=1\n")
    assert (tmp_path / "proj/sub/setenv.sh").read_text() == "export A=1\n"
    assert stat.S_IMODE((tmp_path / "proj/sub/setenv.sh").stat().st_mode) == 0o644
    host.write_atomic("/proj/sub/setenv.sh", b"export A=2\n")  # replaced, not appended
    assert (tmp_path / "proj/sub/setenv.sh").read_bytes() == b"export A=2\n"
    assert sorted(p.name for p in (tmp_path / "proj/sub").iterdir()) == ["setenv.sh"]  # no temp left
    (tmp_path / "proj/sub/setenv.sh").chmod(0o600)
    host.write_atomic("/proj/sub/setenv.sh", b"export A=3\n")
    assert stat.S_IMODE((tmp_path / "proj/sub/setenv.sh").stat().st_mode) == 0o600  # kept private


def test_write_atomic_replaces_a_planted_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "lock").symlink_to(victim)
    Host.for_test(tmp_path).write_atomic("/lock", "new\n")
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "lock").is_symlink() and (tmp_path / "lock").read_text() == "new\n"


def test_write_atomic_follow_writes_the_file_a_user_link_names(tmp_path):
    target = tmp_path / "dotfiles/setenv.sh"
    target.parent.mkdir()
    target.write_text("old\n")
    (tmp_path / "setenv.sh").symlink_to(target)
    Host.for_test(tmp_path).write_atomic("/setenv.sh", "new\n", follow=True)
    assert (tmp_path / "setenv.sh").is_symlink() and target.read_text() == "new\n"


def test_a_directory_in_the_way_is_an_error_with_a_hint_naming_it(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/out", "x", instead="give -o a file")
    assert err.value.message == "cannot write /out: Is a directory"
    assert err.value.hint == "/out is a directory; give -o a file"
    assert err.value.id == "io.eisdir"


def test_a_file_where_a_folder_should_be_is_an_error_not_a_traceback(tmp_path):
    (tmp_path / "notdir").write_text("")
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/notdir/x.sh", "x")
    assert "/notdir" in err.value.message and "not a directory" in err.value.hint
    assert err.value.id == "io.enotdir"


def test_a_nul_byte_in_a_path_is_an_error(tmp_path):
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/a\0b", "x")
    assert err.value.id == "io.bad-path"


def _same_node(path, before: os.stat_result) -> bool:
    after = os.lstat(path)
    return (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)


def test_write_atomic_follow_writes_through_a_character_device_and_keeps_it(tmp_path):
    """`emit -o /dev/null` as root: the device is written into, as `> /dev/null` does; a
    rename over it would have deleted the system's device."""
    node = make_device(tmp_path / "null", "char")
    before = os.lstat(node)
    (tmp_path / "to-null").symlink_to(node)
    host = Host.for_test(tmp_path)
    host.write_atomic("/null", "export A=1\n", follow=True)
    host.write_atomic("/to-null", "export A=1\n", follow=True)  # a link to one, as /dev/stdout is
    assert _same_node(node, before) and (tmp_path / "to-null").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "to-null"]  # no temp left


def test_write_atomic_follow_writes_through_a_fifo_and_keeps_it(tmp_path):
    fifo = make_device(tmp_path / "fifo", "fifo")
    before = os.lstat(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader already there: the writer need not wait
    try:
        Host.for_test(tmp_path).write_atomic("/fifo", b"export A='1'\n" * 1000, follow=True)
        got = b""
        while chunk := os.read(reader, 65536):
            got += chunk
    finally:
        os.close(reader)
    assert got == b"export A='1'\n" * 1000
    assert _same_node(fifo, before)


def test_a_full_device_is_an_error_with_a_hint_and_is_kept(tmp_path):
    node = make_device(tmp_path / "full", "char", FULL_DEVICE)
    before = os.lstat(node)
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/full", "x", follow=True, instead="give -o a file")
    assert err.value.message == "cannot write /full: No space left on device"
    assert err.value.hint == "/full is a character device that takes no more data; give -o a file"
    assert err.value.id == "io.enospc"
    assert _same_node(node, before)


@pytest.mark.parametrize("kind", ["block", "socket"])
def test_write_atomic_follow_refuses_a_block_device_or_socket_and_keeps_it(tmp_path, kind):
    node = make_device(tmp_path / "node", kind, (7, 250))  # never opened: refused on its stat
    before = os.lstat(node)
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/node", "x", follow=True, instead="give -o a file")
    what = {"block": "a block device", "socket": "a socket"}[kind]
    assert err.value.message == f"cannot write /node: it is {what}, not a regular file"
    assert err.value.hint == f"/node is {what}, which the doctor neither replaces nor writes into; give -o a file"
    assert err.value.id == "io.not-a-file"
    assert _same_node(node, before)


@pytest.mark.parametrize("kind", ["fifo", "char", "block", "socket"])
def test_write_atomic_without_follow_refuses_every_special_file(tmp_path, kind):
    """The lock file and the download's resume note (no `follow`) are regular files or nothing:
    a pipe or device planted at their name is neither replaced nor written into."""
    node = make_device(tmp_path / "libtorch.lock", kind, (7, 250) if kind == "block" else (1, 3))
    before = os.lstat(node)
    with pytest.raises(DoctorError) as err:
        Host.for_test(tmp_path).write_atomic("/libtorch.lock", "{}\n")  # would block on a FIFO if opened
    assert err.value.id == "io.not-a-file" and "not a regular file" in err.value.message
    assert _same_node(node, before)


def test_append_adds_and_creates(tmp_path):
    host = Host.for_test(tmp_path)
    (tmp_path / "runner").mkdir()
    host.append("/runner/env", "A=1\n")  # created
    host.append("/runner/env", "B=2\n")
    assert (tmp_path / "runner/env").read_text() == "A=1\nB=2\n"
    assert host.file_size("/runner/env") == 8 and host.file_size("/runner/missing") == 0


def test_append_refuses_a_fifo_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    reader = os.open(tmp_path / "fifo", os.O_RDONLY | os.O_NONBLOCK)  # so opening for writing succeeds
    try:
        with pytest.raises(DoctorError) as err:
            Host.for_test(tmp_path).append("/fifo", "A=1\n", doing="append to $GITHUB_ENV")
        assert err.value.message == "cannot append to $GITHUB_ENV /fifo: it is a named pipe (FIFO), not a regular file"
        assert os.read(reader, 100) == b""  # nothing was written into it
    finally:
        os.close(reader)


def test_create_new_never_overwrites_nor_follows_a_link(tmp_path):
    host = Host.for_test(tmp_path)
    host.create_new("/rec.json", "{}\n", mode=0o600)
    assert stat.S_IMODE((tmp_path / "rec.json").stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        host.create_new("/rec.json", "again")
    (tmp_path / "victim").write_text("keep")
    (tmp_path / ".ok").symlink_to(tmp_path / "victim")
    with pytest.raises((FileExistsError, DoctorError)):
        host.create_new("/.ok", "")
    assert (tmp_path / "victim").read_text() == "keep"


def test_temp_dir_lives_under_the_root_and_goes_away(tmp_path):
    host = Host.for_test(tmp_path)
    with host.temp_dir("probe-") as tmp:
        assert str(tmp).startswith("/tmp/probe-")
        host.create_new(tmp / "probe.cpp", "int main(){}\n")
        real = host.real(tmp / "probe.cpp")
        assert real.is_file() and str(real).startswith(str(tmp_path))
    assert not real.parent.exists()


def test_one_translation_for_fetch_and_the_rest():
    """fetch's os_error is the same function with fetch's way out appended."""
    import errno

    from doctor.fetch.fsops import os_error as fetch_error
    from doctor.writes import os_error

    exc = OSError(errno.ENOSPC, "No space left on device")
    plain, fetch = os_error(exc, "write", "/d/x"), fetch_error(exc, "write", "/d/x")
    assert plain.message == fetch.message == "cannot write /d/x: No space left on device"
    assert fetch.hint.startswith(plain.hint) and "--dest" in fetch.hint and "/d/x" in plain.hint
    assert plain.id == fetch.id == "io.enospc"
