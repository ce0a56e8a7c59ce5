"""The loader probe lists each directory once per run and looks names up in the listing
(issue 19), with the same answers as asking the file system name by name."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import PurePath

from doctor.host import Host
from doctor.probe.loader import LoaderCache, resolve_needed


def test_long_ld_library_path_resolves_as_the_loader_does(tmp_path, abi_libs):
    root = tmp_path / "root"
    found = root / "opt/found"
    found.mkdir(parents=True)
    shutil.copy(abi_libs["cxx11"], found / "libc10.so")
    consumer = root / "opt/app/libapp.so"
    consumer.parent.mkdir(parents=True)
    src = tmp_path / "app.cpp"
    src.write_text("int app() { return 1; }\n")
    subprocess.run(["g++", "-shared", "-fPIC", "-Wl,--no-as-needed", "-o", str(consumer), str(src), f"-L{found}",
                    "-lc10"], check=True)
    empty = [f"/opt/empty/{i}" for i in range(300)]
    for d in empty:
        (root / d.lstrip("/")).mkdir(parents=True)
    dangling = root / "opt/dangling"
    dangling.mkdir()
    os.symlink("/nowhere/libc10.so", dangling / "libc10.so")  # listed, but no library
    search = [*empty[:150], "/opt/dangling", "/opt/missing", *empty[150:], "/opt/found"]
    host = Host.for_test(root, env={"LD_LIBRARY_PATH": ":".join(search)})
    cache = LoaderCache({})
    resolutions, elf = resolve_needed(host, PurePath("/opt/app/libapp.so"), cache)
    c10 = next(r for r in resolutions if r.name == "libc10.so")
    assert (c10.path, c10.via) == ("/opt/found/libc10.so", "LD_LIBRARY_PATH")
    # every directory was listed once into the run's cache; a second library reuses it
    assert len(cache.listings) >= len(search) and cache.listings["/opt/missing"] == frozenset()
    assert "libc10.so" in cache.listings["/opt/dangling"]
    before = dict(cache.listings)
    again, _ = resolve_needed(host, PurePath("/opt/app/libapp.so"), cache)
    assert again == resolutions and cache.listings == before
    # without the library in the path, the answer is "nowhere" (no ld.so.cache entry here)
    host = Host.for_test(root, env={"LD_LIBRARY_PATH": ":".join(search[:-1])})
    lost = next(r for r in resolve_needed(host, PurePath("/opt/app/libapp.so"), LoaderCache({}))[0]
                if r.name == "libc10.so")
    assert (lost.path, lost.via) == (None, "")
