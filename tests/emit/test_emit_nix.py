"""The emitted flake: Nix parses it, a stub nixpkgs evaluates it, and its hash is Nix's own NAR hash."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from testsupport.support import doctor_subprocess, make_tree
from testsupport.emit_helpers import eval_flake, fake_install, need, nix_env, nix_parse

from doctor.emit import nix
from doctor.errors import DoctorError
from doctor.host import Host
from doctor.nar import nar_hash

URL = "https://download.pytorch.org/libtorch/cpu/libtorch-shared-with-deps-2.13.0%2Bcpu.zip"
GOOD_HASH = "sha256-" + base64.b64encode(bytes(range(32))).decode()


def nix_hash_sri(tree: Path, workdir: Path) -> str:
    """Nix's own NAR hash of `tree` (2.8 has no --sri and no `nix hash convert`: hex, then base64)."""
    out = subprocess.run([need("nix-hash"), "--store", "dummy://", "--type", "sha256", str(tree)],
                         capture_output=True, text=True, timeout=60, env=nix_env(workdir))
    assert out.returncode == 0, out.stderr
    return "sha256-" + base64.b64encode(bytes.fromhex(out.stdout.strip())).decode()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> dict[str, Path]:
    """A small libtorch-shaped zip (executable file, symlink, nested dirs), unpacked by `unzip`."""
    base = tmp_path_factory.mktemp("archive")
    src = make_tree(base / "src/libtorch", "2.13.0", "cpu", abi_line="1")
    (src / "lib/libc10.so").write_bytes(b"\x7fELF not really" * 100)
    (src / "bin").mkdir()
    (src / "bin/torch_shm_manager").write_text("#!/bin/sh\n")
    os.chmod(src / "bin/torch_shm_manager", 0o755)
    os.symlink("libc10.so", src / "lib/libc10.so.2")
    zip_path = base / "libtorch-shared-with-deps-2.13.0+cpu.zip"
    subprocess.run([need("zip"), "-qry", str(zip_path), "libtorch"], cwd=base / "src", check=True, timeout=60)

    def unpack(where: Path) -> Path:
        where.mkdir()
        subprocess.run([need("unzip"), "-q", str(zip_path), "-d", str(where)], check=True, timeout=60)
        return where / "libtorch"  # fetchzip strips the single top folder

    return {"zip": zip_path, "reference": unpack(base / "reference"), "installed": unpack(base / "installed"),
            "work": base}


def install_record(tree: Path, **fields) -> None:
    record = {"version": "2.13.0", "variant": "cpu", "abi": "cxx11", "platform": "linux-x86_64",
              "source": {"kind": "url", "url": URL, "file": "libtorch-shared-with-deps-2.13.0+cpu.zip"}}
    record.update(fields)
    (tree / "torch-doctor.json").write_text(json.dumps(record))


def test_python_nar_hash_equals_nix_hash_of_the_unpacked_archive(archive):
    assert (archive["reference"] / "lib/libc10.so.2").is_symlink()
    assert os.access(archive["reference"] / "bin/torch_shm_manager", os.X_OK)
    assert nar_hash(archive["reference"]) == nix_hash_sri(archive["reference"], archive["work"])


def test_flake_hash_is_nix_own_hash_and_devshell_evaluates(archive, tmp_path):
    tree = archive["installed"]
    install_record(tree, nar_hash=nar_hash(tree))  # what fetch-libtorch records before adding the record
    got = doctor_subprocess("emit", "nix", "--libtorch", str(tree))
    assert got.returncode == 0, got.stderr
    flake = got.stdout
    assert nix_parse(flake, tmp_path).returncode == 0

    result = eval_flake(flake, tmp_path / "eval")
    fetched = result["packages"]["x86_64-linux"]["fetched"]
    assert fetched["hash"] == nix_hash_sri(archive["reference"], tmp_path)
    assert fetched["url"] == URL
    assert fetched["name"] == "libtorch-2.13.0-cpu"
    assert result["inputs"]["nixpkgs"]["url"].startswith("github:NixOS/nixpkgs/nixos-")

    store = "/nix/store/stub-libtorch-2.13.0-cpu"
    assert result["devShells"] == {"x86_64-linux": {
        "LIBTORCH": store,
        "LIBTORCH_INCLUDE": store,
        "LIBTORCH_LIB": store,
        "LIBTORCH_CXX11_ABI": "1",
        "Torch_DIR": f"{store}/share/cmake/Torch",
        "CMAKE_PREFIX_PATH": store,
        "CPLUS_INCLUDE_PATH": f"{store}/include:{store}/include/torch/csrc/api/include",
        "LIBRARY_PATH": f"{store}/lib",
        "LD_LIBRARY_PATH": f"{store}/lib:/nix/store/stub-gcc-lib/lib",
    }}


def test_record_without_nar_hash_is_hashed_without_the_files_fetch_added(archive, tmp_path):
    tree = tmp_path / "libtorch"
    shutil.copytree(archive["reference"], tree, symlinks=True)
    install_record(tree)
    (tree / "libtorch.lock").write_text("{}")
    install = fake_install(str(tree), record=json.loads((tree / "torch-doctor.json").read_text()))
    flake = nix.render(install, Host(env={}))
    assert f'hash = "{nix_hash_sri(archive["reference"], tmp_path)}";' in flake


def test_cuda_flake_adds_the_nixos_driver_path(tmp_path):
    record = {"platform": "linux-x86_64", "source": {"url": URL.replace("cpu", "cu130")}, "nar_hash": GOOD_HASH}
    flake = nix.render(fake_install("/opt/libtorch", variant="cu130", record=record), Host(env={}))
    shell = eval_flake(flake, tmp_path)["devShells"]["x86_64-linux"]
    assert shell["LD_LIBRARY_PATH"].split(":")[-1] == "/run/opengl-driver/lib"


def test_macos_flake_is_for_aarch64_darwin_with_dyld(tmp_path):
    record = {"platform": "macos-arm64", "source": {"url": "https://download.pytorch.org/libtorch/cpu/libtorch-macos-arm64-2.13.0.zip"},
              "nar_hash": GOOD_HASH}
    flake = nix.render(fake_install("/opt/libtorch", abi=None, record=record), Host(env={}))
    result = eval_flake(flake, tmp_path)
    shell = result["devShells"]["aarch64-darwin"]
    assert shell["DYLD_LIBRARY_PATH"] == "/nix/store/stub-libtorch-2.13.0-cpu/lib"
    assert "LD_LIBRARY_PATH" not in shell and "LIBTORCH_CXX11_ABI" not in shell


@pytest.mark.parametrize("variant", ["cpu", "cu130"])
def test_nixpkgs_libtorch_uses_libtorch_bin_with_headers_from_dev(tmp_path, variant):
    flake = nix.render(fake_install("/opt/whatever", variant=variant), Host(env={}), nixpkgs_libtorch=True)
    assert nix_parse(flake, tmp_path).returncode == 0
    result = eval_flake(flake, tmp_path / "eval")
    out = "/nix/store/stub-libtorch-bin" + ("-cuda" if variant != "cpu" else "")
    dev = "/nix/store/stub-libtorch-bin-dev"
    systems = ["x86_64-linux"] if variant != "cpu" else ["aarch64-darwin", "x86_64-linux"]
    assert sorted(result["devShells"]) == systems
    linux = result["devShells"]["x86_64-linux"]
    assert linux["CPLUS_INCLUDE_PATH"] == f"{dev}/include:{dev}/include/torch/csrc/api/include"
    assert linux["Torch_DIR"] == f"{dev}/share/cmake/Torch"
    assert linux["LIBTORCH_INCLUDE"] == dev and linux["LIBTORCH_LIB"] == out
    assert linux["LD_LIBRARY_PATH"].split(":")[0] == f"{out}/lib"
    assert result["packages"]["x86_64-linux"]["libtorch"] == out
    if variant == "cpu":
        assert result["devShells"]["aarch64-darwin"]["DYLD_LIBRARY_PATH"] == f"{out}/lib"


def test_awkward_strings_stay_exact_in_nix(tmp_path):
    url = "https://example.org/a b/${x}/\"q\"/libtorch.zip"
    record = {"platform": "linux-x86_64", "source": {"url": url}, "nar_hash": GOOD_HASH}
    flake = nix.render(fake_install("/opt/${HOME} \"x\"\\y/libtorch", record=record), Host(env={}))
    result = eval_flake(flake, tmp_path)
    assert result["packages"]["x86_64-linux"]["fetched"]["url"] == url


def test_wheel_libtorch_says_it_has_no_source_and_names_the_fetch_command(tmp_path, wheel_root):
    got = doctor_subprocess("emit", "nix")  # the active libtorch here is the torch wheel's
    assert got.returncode == 1 and got.stdout == ""
    assert "Python wheel's libtorch" in got.stderr
    assert "doctor fetch-libtorch" in got.stderr and "--nixpkgs-libtorch" in got.stderr
    ok = doctor_subprocess("emit", "nix", "--nixpkgs-libtorch", "--libtorch", str(wheel_root))
    assert ok.returncode == 0, ok.stderr
    assert nix_parse(ok.stdout, tmp_path).returncode == 0


def test_bad_record_hash_is_refused():
    record = {"platform": "linux-x86_64", "source": {"url": URL}, "nar_hash": "sha256-short"}
    with pytest.raises(DoctorError, match="SRI"):
        nix.render(fake_install("/opt/libtorch", record=record), Host(env={}))


def test_parse_rejects_a_broken_flake(tmp_path):
    # The parse check can fail: a flake with a missing semicolon is refused.
    record = {"platform": "linux-x86_64", "source": {"url": URL}, "nar_hash": GOOD_HASH}
    flake = nix.render(fake_install("/opt/libtorch", record=record), Host(env={}))
    broken = flake.replace('default = libtorch;', 'default = libtorch', 1)
    assert nix_parse(broken, tmp_path).returncode != 0


def test_archive_without_a_top_folder_is_fetched_with_strip_root_false(tmp_path):
    record = {"platform": "linux-x86_64", "source": {"kind": "url", "url": URL}, "nar_hash": GOOD_HASH, "strip_root": False}
    flake = nix.render(fake_install("/opt/libtorch", record=record), Host(env={}))
    assert eval_flake(flake, tmp_path)["packages"]["x86_64-linux"]["fetched"]["stripRoot"] is False


@pytest.mark.parametrize("kind", ["wheel", "archive"])
def test_tree_fetched_from_a_wheel_or_local_archive_cannot_be_refetched_by_nix(kind):
    record = {"platform": "linux-x86_64", "source": {"kind": kind, "url": None if kind == "archive" else
              "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"},
              "nar_hash": GOOD_HASH}
    with pytest.raises(DoctorError, match=f"no known source archive \\(fetched from a {'wheel' if kind == 'wheel' else 'local archive'}"):
        nix.render(fake_install("/opt/libtorch", record=record), Host(env={}))


def test_dollar_and_backslash_next_to_a_store_reference_stay_literal(tmp_path):
    from doctor.emit.nix import _ROOT, _with_refs

    values = {"a": "a$" + _ROOT, "b": "x\\$" + _ROOT, "c": _ROOT + "/y$", "d": "${z}" + _ROOT}
    body = " ".join(f"{k} = {_with_refs(v)};" for k, v in values.items())
    (tmp_path / "t.nix").write_text(f'let libtorch = "/S"; in {{ {body} }}')
    out = subprocess.run([need("nix-instantiate"), "--store", "dummy://", "--eval", "--strict", "--json", str(tmp_path / "t.nix")],
                         capture_output=True, text=True, timeout=30, env=nix_env(tmp_path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {k: v.replace(_ROOT, "/S") for k, v in values.items()}
