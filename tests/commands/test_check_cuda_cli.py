"""`doctor check --binary` and the CUDA facts through the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from testsupport.support import doctor_subprocess


def test_binary_in_json_with_evidence(tmp_path, abi_libs):
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(abi_libs["cxx11"], lib / "libc10.so")
    (tmp_path / "stub.cpp").write_text('extern "C" int warp_size() { return 32; }\n')
    subprocess.run(["g++", "-shared", "-fPIC", "-Wl,-soname,libtorch_cuda.so", "-o", str(lib / "libtorch_cuda.so"),
                    str(tmp_path / "stub.cpp")], check=True)
    (tmp_path / "p.cpp").write_text(
        '#include <string>\nnamespace c10 { struct Device { explicit Device(const std::string& s); }; }\n'
        'int main() { c10::Device d(std::string("cpu")); }\n')
    subprocess.run(["g++", "-o", str(tmp_path / "p"), str(tmp_path / "p.cpp"), f"-L{lib}", "-Wl,--as-needed",
                    "-lc10", "-ltorch_cuda", f"-Wl,-rpath,{lib}"], check=True)
    run = doctor_subprocess("check", "--json", "--binary", str(tmp_path / "p"))
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    binary = doc["facts"]["binary"]
    assert binary["torch_cuda_beside"] is True and binary["undefined_torch_cxx11"] == 1
    assert [n["name"] for n in binary["needed"]][:1] == ["libc10.so"]
    assert binary["evidence"][0]["kind"] == "elf"
    assert any(f["id"] == "link.as-needed" for f in doc["findings"])
    assert "cuda_toolkit" in doc["facts"] and "cuda_home_via" in doc["facts"]["cuda_toolkit"]


def test_binary_missing_is_a_usage_error(tmp_path):
    run = doctor_subprocess("check", "--binary", str(tmp_path / "nope"))
    assert run.returncode == 2
    assert run.stderr.splitlines()[0] == f"error: --binary {tmp_path / 'nope'}: no such file"
    assert run.stderr.splitlines()[1].startswith("hint:")
    # what is there instead is named ("no such file" before), the path shown as it is, not as a Python repr
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "loop").symlink_to("loop")
    for name, said in (("pipe", "is a named pipe"), ("loop", "is a symbolic link loop"), (".", "is a directory")):
        run = doctor_subprocess("check", "--binary", str(tmp_path / name))
        assert run.returncode == 2 and run.stderr.splitlines()[0] == f"error: --binary {tmp_path / name}: {said}"
    (tmp_path / "empty.so").write_bytes(b"")
    run = doctor_subprocess("check", "--json", "--binary", str(tmp_path / "empty.so"))
    (finding,) = [f for f in json.loads(run.stdout)["findings"] if f["id"] == "binary.unreadable"]
    assert finding["title"].endswith("not a readable ELF file: empty file (0 bytes)")  # no "ElfProblem:"
