"""Unpacking: the same tree as Info-ZIP `unzip` (modes, symlinks, names), and nothing written
for archives that try to leave the tree."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from testsupport.fetch_helpers import libtorch_zip, nix_hash_sri, set_raw_external_attr, tree_listing, zinfo

from doctor.fetch.extract import BadArchive, UnsafeArchive, extract_zip
from doctor.fetch.extract import nar_hash_zip

FAT, UNIX, NTFS = 0, 3, 11


def mode_matrix(path: Path) -> Path:
    """Entries from every kind of zip writer: Unix modes, DOS attributes, PKZip-for-Unix
    (FAT host with Unix bits), NTFS, odd bits (setuid, group-only), implied and read-only dirs."""
    entries = [
        ("top/", 0o40755, UNIX, 0x10), ("top/f644", 0o100644, UNIX, 0), ("top/f755", 0o100755, UNIX, 0),
        ("top/f4755", 0o104755, UNIX, 0), ("top/f600", 0o100600, UNIX, 0), ("top/f070", 0o100070, UNIX, 0),
        ("top/notype644", 0o644, UNIX, 0), ("top/dos_rw", 0, FAT, 0x20), ("top/dos_ro", 0, FAT, 0x21),
        ("top/fat_unix755", 0o100755, FAT, 0x20), ("top/fat_unix644", 0o100644, FAT, 0x20),
        ("top/fat_unix444ro", 0o100444, FAT, 0x21), ("top/ntfs755", 0o100755, NTFS, 0x20),
        ("top/d700/", 0o40700, UNIX, 0x10), ("top/d700/x", 0o100644, UNIX, 0), ("top/ddos/", 0, FAT, 0x10),
        ("top/dnoflag/", 0, FAT, 0), ("top/d555/", 0o40555, UNIX, 0x10), ("top/d555/x", 0o100755, UNIX, 0),
        ("top/implied/deep/x", 0o100644, UNIX, 0), ("top/link", 0o120777, UNIX, 0),
        ("top/dirlink", 0o120777, UNIX, 0), ("top/link_fat_inconsistent", 0o120777, FAT, 0x20),
        ("top/zero", 0o100644, UNIX, 0),
    ]
    with zipfile.ZipFile(path, "w") as zf:
        for name, mode, system, dos in entries:
            data = {"top/link": b"f644", "top/dirlink": b"d700", "top/link_fat_inconsistent": b"f644"}.get(name, name.encode())
            zf.writestr(zinfo(name, mode, system, dos), b"" if name.endswith("/") else data)
    set_raw_external_attr(path, "top/zero", 0)  # Unix host, no mode at all
    return path


def unzip_into(z: Path, out: Path, umask: int = 0o022) -> None:
    subprocess.run(["sh", "-c", f'umask {umask:o} && unzip -q "$0" -d "$1"', str(z), str(out)], check=True)


def ours_into(z: Path, out: Path, umask: int = 0o022, **kw):
    out.mkdir()
    old = os.umask(umask)
    try:
        return extract_zip(z, out, **kw)
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_modes_and_symlinks_identical_to_unzip(tmp_path, umask):
    z = mode_matrix(tmp_path / "m.zip")
    unzip_into(z, tmp_path / "unzip", umask)
    result = ours_into(z, tmp_path / "ours", umask)
    assert result.stripped == "top"
    assert tree_listing(tmp_path / "ours") == tree_listing(tmp_path / "unzip/top")
    # the stripped top folder keeps its own mode, as unzip gave it
    assert (tmp_path / "ours").stat().st_mode & 0o7777 == (tmp_path / "unzip/top").stat().st_mode & 0o7777
    assert result.nar_hash == nix_hash_sri(tmp_path / "unzip/top") == nar_hash_zip(z)


def test_zip_made_by_the_zip_tool_round_trips(tmp_path):
    src = tmp_path / "libtorch"
    (src / "lib").mkdir(parents=True)
    (src / "lib/libc10.so.2.13").write_bytes(os.urandom(3000))
    os.chmod(src / "lib/libc10.so.2.13", 0o755)
    os.symlink("libc10.so.2.13", src / "lib/libc10.so")
    (src / "include/torch").mkdir(parents=True)
    (src / "include/torch/torch.h").write_text("#pragma once\n")
    os.chmod(src / "include/torch/torch.h", 0o444)
    (src / "share/empty").mkdir(parents=True)
    (src / "bin").mkdir()
    (src / "bin/tool").write_text("#!/bin/sh\n")
    os.chmod(src / "bin/tool", 0o750)
    subprocess.run(["zip", "-q", "-r", "-y", "lt.zip", "libtorch"], cwd=tmp_path, check=True)
    unzip_into(tmp_path / "lt.zip", tmp_path / "unzip")
    result = ours_into(tmp_path / "lt.zip", tmp_path / "ours")
    assert tree_listing(tmp_path / "ours") == tree_listing(tmp_path / "unzip/libtorch")
    assert result.nar_hash == nix_hash_sri(tmp_path / "unzip/libtorch")
    assert os.readlink(tmp_path / "ours/lib/libc10.so") == "libc10.so.2.13"


def test_non_ascii_names_like_unzip(tmp_path):
    z = tmp_path / "u.zip"
    with zipfile.ZipFile(z, "w") as zf:  # Python sets the UTF-8 flag for these
        zf.writestr(zinfo("top/é/ü.h", 0o100644), b"x")
    src = tmp_path / "src" / "top"
    src.mkdir(parents=True)
    (src / "ñ.txt").write_text("y")
    subprocess.run(["zip", "-q", "-r", str(tmp_path / "z.zip"), "top"], cwd=tmp_path / "src", check=True,
                   env={**os.environ, "LC_ALL": "C.UTF-8"})  # Info-ZIP style: Unicode Path extra field
    for archive in (z, tmp_path / "z.zip"):
        out_u, out_o = tmp_path / (archive.stem + "_u"), tmp_path / (archive.stem + "_o")
        subprocess.run(["unzip", "-q", str(archive), "-d", str(out_u)], check=True,
                       env={**os.environ, "LC_ALL": "C.UTF-8"})
        ours_into(archive, out_o)
        assert tree_listing(out_o) == tree_listing(out_u / "top")


def test_no_single_top_folder_is_not_stripped(tmp_path):
    z = tmp_path / "flat.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr(zinfo("lib/a.so", 0o100755), b"a")
        zf.writestr(zinfo("include/a.h", 0o100644), b"h")
    result = ours_into(z, tmp_path / "out")
    assert result.stripped is None and (tmp_path / "out/lib/a.so").is_file()


# -- malicious archives --

MALICIOUS = {
    "dotdot": [("libtorch/lib/../../evil", 0o100644, b"x")],
    "dotdot-first": [("../evil", 0o100644, b"x")],
    "absolute": [("/tmp/evil-abs", 0o100644, b"x")],
    "escaping-symlink": [("libtorch/lib/l", 0o120777, b"../../../outside")],
    "absolute-symlink": [("libtorch/lib/l", 0o120777, b"/etc/passwd")],
    # each link stays inside on its own; together they climb out
    "symlink-chain": [("libtorch/sub/up", 0o120777, b".."), ("libtorch/l", 0o120777, b"sub/up/..")],
    # write through a symlink the archive itself made
    "through-symlink": [("libtorch/sub", 0o120777, b"."), ("libtorch/sub/x", 0o100644, b"x")],
    "file-as-dir": [("libtorch/f", 0o100644, b"x"), ("libtorch/f/g", 0o100644, b"y")],
    "duplicate": [("libtorch/a", 0o100644, b"x"), ("libtorch/a", 0o100644, b"y")],
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_archives_refused_with_nothing_written(tmp_path, case):
    import warnings

    z = tmp_path / "evil.zip"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name
        with zipfile.ZipFile(z, "w") as zf:
            zf.writestr(zinfo("libtorch/ok.h", 0o100644), b"fine")
            for name, mode, data in MALICIOUS[case]:
                zf.writestr(zinfo(name, mode), data)
    sandbox = tmp_path / "sandbox"
    staging = sandbox / "deep" / "staging"
    staging.mkdir(parents=True)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UnsafeArchive) as err:
        extract_zip(z, staging)
    assert "refusing" in err.value.message
    assert list(staging.iterdir()) == []  # checked before a single byte is written
    assert sorted(p.relative_to(sandbox).as_posix() for p in sandbox.rglob("*")) == ["deep", "deep/staging"]
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not Path("/tmp/evil-abs").exists()
    with pytest.raises(UnsafeArchive):
        nar_hash_zip(z)


def test_inside_symlinks_are_kept(tmp_path):
    z = libtorch_zip(tmp_path / "l.zip", extra=[("libtorch/lib/sub/back", 0o120777, b"../libtorch.so"),
                                                ("libtorch/self", 0o120777, b"self")])
    ours_into(z, tmp_path / "out")
    assert os.readlink(tmp_path / "out/lib/sub/back") == "../libtorch.so"
    assert os.readlink(tmp_path / "out/lib/libtorch.so") == "libtorch.so.2"


def test_damaged_archive(tmp_path):
    z = libtorch_zip(tmp_path / "l.zip", payload=200_000)
    data = bytearray(z.read_bytes())
    data[5000:5100] = bytes(100)  # inside the deflated payload of libc10.so
    z.write_bytes(bytes(data))
    with pytest.raises(BadArchive, match="damaged"):
        ours_into(z, tmp_path / "out")
    (tmp_path / "t.zip").write_bytes(bytes(data[: len(data) // 2]))  # cut in half: no central directory
    with pytest.raises(BadArchive, match="not a readable zip"):
        ours_into(tmp_path / "t.zip", tmp_path / "out2")


def test_an_archive_cut_at_its_start_is_damaged_not_an_unwritable_folder(tmp_path):
    """zipfile seeks before byte 0 for an entry of an archive missing its first bytes: that
    EINVAL was reported as the destination's ("cannot unpack … into <folder>: Invalid argument")."""
    z = libtorch_zip(tmp_path / "l.zip")
    cut = tmp_path / "cut.zip"
    cut.write_bytes(z.read_bytes()[100:])
    for unpack in (lambda: ours_into(cut, tmp_path / "out"), lambda: nar_hash_zip(cut)):
        with pytest.raises(BadArchive, match="the archive is damaged: its entry 'libtorch/.*' lies outside the file"):
            unpack()
