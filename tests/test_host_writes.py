"""The write side of the Host door (doctor/writes.py): atomic replace, append, create-new, the
root mapping reads use, and one translation of the world's errors into `error:` + `hint:`.

Real files, real symlinks and real FIFOs under a Host over a temporary root."""

from __future__ import annotations

import os
import stat

import pytest

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
        assert err.value.message.startswith("cannot append to $GITHUB_ENV /fifo")
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
