"""Commands the doctor runs get LD_LIBRARY_PATH without entries that cannot hold a library
(issue 19): the loader finds the same libraries, without searching thousands of empty dirs."""

from __future__ import annotations

import os
import sys

from doctor.host import Host


def test_child_ld_library_path_drops_only_entries_that_cannot_hold_libraries(tmp_path, wheel_root):
    empty = [tmp_path / f"empty{i}" for i in range(40)]
    for d in empty:
        d.mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    lib = str(wheel_root / "lib")
    entries = [*map(str, empty[:20]), lib, str(tmp_path / "missing"), str(a_file), "", *map(str, empty[20:]), lib]
    host = Host.from_system()
    host.env = {**host.env, "LD_LIBRARY_PATH": ":".join(entries)}
    run = host.run([sys.executable, "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])"])
    assert run.stdout.strip() == f"{lib}:"  # the real directory, then the empty entry (the cwd)
    # and what a child loads through it is unchanged: libc10 from the wheel's lib
    probe = host.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libc10.so'); print('ok')"])
    assert probe.stdout.strip() == "ok", probe.stderr
    # the host's own view, which the loader probe reports, is untouched
    assert host.env["LD_LIBRARY_PATH"] == ":".join(entries)


def test_short_or_unset_ld_library_path_is_passed_as_is(tmp_path):
    host = Host.from_system()
    host.env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    run = host.run([sys.executable, "-c", "import os; print(os.environ.get('LD_LIBRARY_PATH', '-'))"])
    assert run.stdout.strip() == "-"
    host.env = {**host.env, "LD_LIBRARY_PATH": f"{tmp_path / 'missing'}"}
    run = host.run([sys.executable, "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])"])
    assert run.stdout.strip() == str(tmp_path / "missing")
