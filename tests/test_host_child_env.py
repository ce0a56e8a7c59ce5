"""Commands the doctor runs get LD_LIBRARY_PATH without entries that cannot hold a library
(issue 19): the loader finds the same libraries, without searching thousands of empty dirs."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from doctor.host import Host
from doctor.probe.loader import LoaderCache, dirs_holding


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


def _long_path(tmp_path, lib: str) -> list[str]:
    empty = [tmp_path / f"empty{i}" for i in range(40)]
    for d in empty:
        d.mkdir()
    (tmp_path / "file").write_text("x")
    return [*map(str, empty[:20]), lib, str(tmp_path / "missing"), str(tmp_path / "file"), *map(str, empty[20:])]


def test_commands_started_at_once_all_get_the_pruned_path(tmp_path, wheel_root):
    """Probes start their commands together: each child gets the same pruned value, whichever
    thread worked it out."""
    lib = str(wheel_root / "lib")
    host = Host.from_system()
    host.env = {**host.env, "LD_LIBRARY_PATH": ":".join(_long_path(tmp_path, lib))}
    with ThreadPoolExecutor(6) as pool:
        runs = list(pool.map(lambda _: host.run([sys.executable, "-c", "import os; print(os.environ['LD_LIBRARY_PATH'])"]),
                             range(6)))
    assert [r.stdout.strip() for r in runs] == [lib] * 6


def test_the_loader_probe_reuses_what_the_pruning_found_and_resolves_the_same(tmp_path, wheel_root):
    lib = str(wheel_root / "lib")
    entries = _long_path(tmp_path, lib)
    host = Host.from_system()
    host.env = {**host.env, "LD_LIBRARY_PATH": ":".join(entries)}
    listed = host.library_dir_listings()
    assert set(listed) == set(entries)
    assert listed[lib] == frozenset(os.listdir(lib))
    assert {e for e, names in listed.items() if not names} == {e for e in entries if e != lib}
    cache = LoaderCache()
    assert dirs_holding(host, entries, "libc10.so", cache) == [lib]
    assert dirs_holding(host, entries, "libnothing.so", cache) == []
    assert cache.listings == {}  # no entry was listed a second time
    # a short path is not pruned: nothing is known, every directory is listed
    short = Host.from_system()
    short.env = {**short.env, "LD_LIBRARY_PATH": f"{tmp_path / 'empty0'}:{lib}"}
    assert short.library_dir_listings() == {}
    cache = LoaderCache()
    assert dirs_holding(short, [str(tmp_path / "empty0"), lib], "libc10.so", cache) == [lib]
    assert set(cache.listings) == {str(tmp_path / "empty0"), lib}
