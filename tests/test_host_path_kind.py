"""Host.path_kind: what a path names when it is not the directory a variable promised."""

from __future__ import annotations

import os
import shutil
import socket

from testsupport.support import as_another_user, world_tmp_dir

from doctor.diagnose.common import NOT_A_DIRECTORY
from doctor.host import Host


def test_every_kind_of_path(tmp_path):
    host = Host.from_system()
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "to-dir").symlink_to(tmp_path / "dir")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "sock"))
        kinds = {name: host.path_kind(tmp_path / name)
                 for name in ("dir", "file", "fifo", "loop", "to-dir", "sock", "missing", "file/below")}
    finally:
        sock.close()
    assert kinds == {"dir": "directory", "file": "file", "fifo": "fifo", "loop": "loop", "to-dir": "directory",
                     "sock": "socket", "missing": "missing", "file/below": "under-file"}
    assert host.path_kind("/dev/null") == "device"
    assert host.path_kind(tmp_path / ("a" * 300)) == "too-long"
    assert host.path_kind("bad\0name") == "missing"
    assert set(kinds.values()) - {"directory"} <= set(NOT_A_DIRECTORY)


def test_a_directory_behind_one_without_search_permission():
    top = world_tmp_dir("path-kind-")
    try:
        (top / "open" / "libtorch").mkdir(parents=True)
        (top / "locked" / "libtorch").mkdir(parents=True)
        (top / "locked").chmod(0o700)
        host = Host.from_system()
        kinds = as_another_user(lambda: [host.path_kind(top / "open" / "libtorch"), host.path_kind(top / "locked" / "libtorch")])
        assert kinds == ["directory", "denied"]
    finally:
        shutil.rmtree(top)
