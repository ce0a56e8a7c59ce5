"""`doctor check` on a sick machine: hostile files, floods, hangs and odd values give findings
and exit 0/1, never a hang, a crash (exit 3) or a wrong "all is well"."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from testsupport.support import as_another_user, doctor_subprocess, make_tree, torch_root, world_tmp_dir

from doctor.check import build_areas, gather_facts, run_check
from doctor.host import Host
from doctor.probe.libtorch import detect_libtorch, inspect_tree
from doctor.probe.python_torch import detect_python_torch


def write_exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def findings(host: Host, facts: dict) -> list:
    return [f for area in build_areas(facts, host) for f in area.findings]


def area(host: Host, facts: dict, name: str):
    return next(a for a in build_areas(facts, host) if a.name == name)


# -- bounded reads --


def test_check_command_output_flood_is_capped_and_reported(tmp_path):
    write_exe(tmp_path / "bin/g++", "#!/bin/sh\n/usr/bin/yes 'g++ (GCC) 12.2.0 flooding' | /usr/bin/head -c 3000000\n")
    host = Host.for_test(tmp_path, output_limit=64 << 10)
    run = host.run(["g++", "--version"], timeout=3)
    assert run.truncated and len(run.stdout.encode()) < (64 << 10) + 100
    assert run.stdout.startswith("g++ (GCC) 12.2.0 flooding")
    printed = ("g++ (GCC) 12.2.0 flooding\n" * 120_000)[:3_000_000]
    assert f"[... {3_000_000 - (64 << 10)} bytes dropped by torch-doctor ...]" in run.stdout
    assert run.stdout.endswith(printed[-1000:])  # the end survives too: a build's last error
    report = run_check(host)
    flagged = [f for a in report.areas for f in a.findings if f.title.startswith("output truncated")]
    assert flagged and "/bin/g++ --version`" in flagged[0].title and "64 KiB" in flagged[0].title


def test_check_fifo_in_place_of_libc10_does_not_hang(tmp_path, abi_libs):
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "lib/libc10.so").unlink()
    os.mkfifo(root / "lib/libc10.so")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    facts = gather_facts(host)  # would block forever on open() of the FIFO
    active = facts["libtorch"].active_install
    assert active.broken_libraries == {"libc10.so": "not a regular file (a named pipe)"}
    assert any(f.id == "libtorch.path-invalid" and "not a usable library" in f.title for f in findings(host, facts))


def test_check_directory_in_place_of_libc10_is_called_one(tmp_path, abi_libs):
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "lib/libc10.so").unlink()
    (root / "lib/libc10.so").mkdir()  # what was said: "a FIFO, socket or device"
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    assert gather_facts(host)["libtorch"].active_install.broken_libraries == {"libc10.so": "not a regular file (a directory)"}


def test_check_fifo_version_file_and_pyproject_do_not_hang(tmp_path, abi_libs):
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "build-version").unlink()
    os.mkfifo(root / "build-version")
    (tmp_path / "work").mkdir()
    os.mkfifo(tmp_path / "work/pyproject.toml")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    install = inspect_tree(host, "/opt/libtorch", ["LIBTORCH"], [])
    assert [s.file for s in install.version_sources] == ["version.h", "TorchConfigVersion.cmake"]
    assert host.read_text("/work/pyproject.toml") is None
    from doctor.errors import UsageError
    from doctor.check import load_policy

    with pytest.raises(UsageError, match="not a regular file"):
        load_policy(host)


def test_a_policy_file_this_user_may_not_read_is_a_usage_error_not_skipped():
    """Skipped silently, its requirements would not be checked and CI would pass unchecked."""
    from doctor.check import load_policy
    from doctor.errors import UsageError

    top = world_tmp_dir("policy-denied-")
    try:
        (top / "pyproject.toml").write_text('[tool.doctor]\nrequire = ["libtorch >= 2"]\n')
        (top / "pyproject.toml").chmod(0o600)
        host = dataclasses.replace(Host.from_system(), cwd=top)

        def load():
            try:
                return ("policy", repr(load_policy(host)))
            except UsageError as exc:
                return ("usage", exc.message, exc.hint)

        got = as_another_user(load)
    finally:
        shutil.rmtree(top)
    assert got == ("usage", f"{top / 'pyproject.toml'}: cannot be read by this user, so the policy it may hold "
                   "cannot be applied", "make pyproject.toml readable by this user (`ls -l` shows its permissions), "
                   "or run from another folder")


def test_check_path_component_over_255_bytes(tmp_path):
    long = "/opt/" + "x" * 300 + "/libtorch"
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": long, "CMAKE_PREFIX_PATH": long,
                                                       "LD_LIBRARY_PATH": long})
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert any(f["id"] == "libtorch.path-invalid" for f in report["findings"])


def test_check_version_number_with_thousands_of_digits(tmp_path, abi_libs):
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "build-version").write_text("9" * 5000 + ".0.0+cpu\n")
    (root / "include/torch/csrc/api/include/torch/version.h").write_text(
        f"#define TORCH_VERSION_MAJOR {'9' * 5000}\n#define TORCH_VERSION_MINOR 13\n#define TORCH_VERSION_PATCH 0\n")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    facts = gather_facts(host)
    active = facts["libtorch"].active_install
    assert active.version == "2.13.0"  # from TorchConfigVersion.cmake, the one sane file
    bad = [f for f in findings(host, facts) if f.id == "probe.failed" and "is not a version" in f.title]
    assert len(bad) == 2


@pytest.mark.parametrize("text", ["2.13.0abc", "garbage", ""])
def test_check_build_version_not_pep440_is_a_finding(tmp_path, abi_libs, text):
    """Whatever build-version holds that is no version is said, empty too ('garbage' and an empty
    file were dropped without a word, while '2.13.0abc' was a finding)."""
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "build-version").write_text(f"{text}\n")
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": str(root)})
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    bad = [f for f in report["findings"] if f["id"] == "probe.failed" and "build-version" in f["title"]]
    assert bad and f"'{text}' is not a version" in bad[0]["title"]


# -- broken libraries are findings, never "all NEEDED libraries resolve" --


def _elf_variants(good: bytes) -> dict[str, tuple[bytes, str]]:
    wrong_class = bytearray(good)
    wrong_class[4] = 1  # ELFCLASS32 with a 64-bit body
    big = bytearray(good)
    big[5] = 2  # ELFDATA2MSB
    return {
        "empty": (b"", "empty file (0 bytes)"),
        "truncated": (good[:40], "truncated ELF header"),
        "truncated-body": (good[: len(good) // 2], "truncated: section headers end at byte"),
        "not-elf": (b"!<arch>\nnot a shared object\n", "not an ELF file"),
    } | {"wrong-class": (bytes(wrong_class), ""), "wrong-endian": (bytes(big), "")}


@pytest.mark.parametrize("kind", ["empty", "truncated", "truncated-body", "not-elf", "wrong-class", "wrong-endian"])
def test_check_broken_libc10_is_a_finding(tmp_path, abi_libs, kind):
    good = abi_libs["cxx11"].read_bytes()
    data, reason = _elf_variants(good)[kind]
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    shutil.copy(abi_libs["cxx11"], root / "lib/libtorch.so")
    (root / "lib/libc10.so").write_bytes(data)
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    facts = gather_facts(host)
    found = findings(host, facts)
    loader = area(host, facts, "loader")
    assert "all NEEDED libraries resolve" not in loader.summary
    if kind in ("wrong-class", "wrong-endian"):
        # The header parses as the other class or byte order: what it says, or unreadable.
        active = facts["libtorch"].active_install
        hit = [f for f in found if f.id in ("arch.mismatch", "libtorch.path-invalid") and "libc10" in f.title]
        assert hit and hit[0].level.value == "error", [f.title for f in found]
        assert active.elf_class in (None, 32) if kind == "wrong-class" else active.elf_endian in (None, "big")
    else:
        hit = [f for f in found if f.id == "libtorch.path-invalid" and "libc10.so is not a usable library" in f.title]
        assert hit and reason in hit[0].title and hit[0].level.value == "error"
        assert hit[0].evidence and hit[0].evidence[0].source.endswith("libc10.so")


# -- wrong answers --


def test_check_require_local_version_is_met(wheel_root):
    result = doctor_subprocess("check", "--json", "--require", "torch==2.13.0+cpu", "--require", "torch==2.13.0",
                               "--require", "libtorch==2.13.0+cpu")
    report = json.loads(result.stdout)
    req = next(a for a in report["areas"] if a["name"] == "requirements")
    assert req["summary"] == "3 of 3 met", req
    result = doctor_subprocess("check", "--json", "--require", "torch==2.13.0+cu130")
    assert result.returncode == 1
    assert any(f["id"] == "requirement.unmet" for f in json.loads(result.stdout)["findings"])


@pytest.mark.parametrize("key", ["error-on", "ignore"])
def test_check_policy_unknown_finding_id_is_usage_error(tmp_path, key):
    value = '["abi.mismatchh"]' if key == "error-on" else '{ "abi.mismatchh" = "typo" }'
    (tmp_path / "doctor.toml").write_text(f"{key} = {value}\n")
    result = doctor_subprocess("check", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "unknown finding id 'abi.mismatchh' (did you mean 'abi.mismatch'?)" in result.stderr
    assert "hint: " in result.stderr


@pytest.mark.parametrize("text", [
    "require = " + "[" * 50_000 + "]" * 50_000,
    "a" + ".a" * 50_000 + " = 1",
    "x = " + "{a = " * 5000 + "1" + "}" * 5000,
    "min-version = " + "9" * 5000,
], ids=["nested-arrays", "dotted-keys", "nested-inline-tables", "huge-number"])
def test_check_policy_deeply_nested_or_huge_is_usage_error(tmp_path, text):
    (tmp_path / "doctor.toml").write_text(text + "\n")
    result = doctor_subprocess("check", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("error: ") and "hint: " in result.stderr


def test_check_hung_compiler_says_it_did_not_answer(tmp_path):
    write_exe(tmp_path / "bin/g++", "#!/bin/sh\nexec /bin/sleep 60\n")
    write_exe(tmp_path / "bin/cmake", "#!/bin/sh\nexec /bin/sleep 60\n")
    host = Host.for_test(tmp_path, env={"DOCTOR_PROBE_TIMEOUT": "1"})
    facts = gather_facts(host)
    tc = area(host, facts, "toolchain")
    assert "None" not in tc.summary and "None" not in "\n".join(tc.details)
    assert tc.summary.startswith("g++ did not answer in 1 s")
    assert "cmake at /" in tc.summary and "missing" not in tc.summary
    titles = [f.title for f in tc.findings]
    assert any("g++" in t and "did not answer in 1 s" in t for t in titles)


def test_check_cmake_that_exists_is_never_missing(tmp_path):
    write_exe(tmp_path / "bin/cmake", "#!/bin/sh\necho 'cmake: error while loading shared libraries: libjsoncpp.so.25' >&2\nexit 127\n")
    host = Host.for_test(tmp_path)
    tc = area(host, gather_facts(host), "toolchain")
    assert "missing" not in tc.summary and "exit status 127" in tc.summary


# -- which libtorch wins --


def test_check_libtorch_home_tree_wins_over_the_wheel(tmp_path, abi_libs, wheel_root):
    """Hasktorch's cache (LIBTORCH_HOME) comes before the Python wheel in the search order: a
    build with both present uses the cache tree, and says why."""
    home = tmp_path / "lt-home"
    make_tree(home / "2.8.0/linux-x86_64/cpu", "2.8.0", "cpu", libc10=abi_libs["pre-cxx11"])
    host = Host.from_system()
    host = Host(env={**host.env, "LIBTORCH_HOME": str(home)}, glibc=host.glibc)
    libtorch = detect_libtorch(host, detect_python_torch(host))
    roots = [c.root for c in libtorch.candidates]
    assert roots == [str(home / "2.8.0/linux-x86_64/cpu"), str(wheel_root)]
    assert libtorch.active == 0 and "Hasktorch" in libtorch.active_reason
    assert libtorch.active_install.version == "2.8.0"


def test_check_python_torch_version_not_pep440_is_a_finding(tmp_path):
    (tmp_path / "py/torch").mkdir(parents=True)
    (tmp_path / "py/torch/version.py").write_text("__version__ = '2.13.0abc+../../x'\ncuda = None\n")
    host = Host.for_test(tmp_path, sys_path=["/py"])
    report = run_check(host)
    found = [f for a in report.areas for f in a.findings]
    assert not [f for f in found if "GPU probe failed" in f.title], [f.title for f in found]
    bad = [f for f in found if f.id == "probe.failed" and f.area == "python_torch"]
    assert bad and "'2.13.0abc+../../x' is not a version" in bad[0].title
    python = report.facts["python_torch"]
    assert python.base_version is None and python.variant == "cpu"  # the odd label is not a variant


def test_check_unbalanced_quote_in_cxx_and_cxxflags():
    result = doctor_subprocess("check", "--json", env={"CXX": "g++ '"})
    assert result.returncode in (0, 1), result.stderr
    assert any(c["name"] == "$CXX (g++)" for c in json.loads(result.stdout)["facts"]["toolchain"]["compilers"])
    result = doctor_subprocess("check", "--build", "--json", env={"CXXFLAGS": "-O2 '"})
    assert result.returncode == 1, result.stderr
    bad = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "build.failed"]
    assert bad and bad[0]["title"].startswith("CXXFLAGS is not valid shell words (No closing quotation)")


def test_check_real_32bit_libc10_is_arch_mismatch(tmp_path, abi_libs):
    """A real ELFCLASS32 shared object (gcc -m32, linked with ld -m elf_i386) in place of libc10."""
    src = tmp_path / "c10.c"
    src.write_text("int c10_version(void) { return 1; }\n")
    obj, lib = tmp_path / "c10.o", tmp_path / "libc10-32.so"
    subprocess.run(["gcc", "-m32", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run(["ld", "-m", "elf_i386", "-shared", "-o", str(lib), str(obj)], check=True)
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=lib)
    shutil.copy(abi_libs["cxx11"], root / "lib/libtorch.so")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    facts = gather_facts(host)
    active = facts["libtorch"].active_install
    assert (active.elf_class, active.elf_machine) == (32, "i386")
    hit = [f for f in findings(host, facts) if f.id == "arch.mismatch"]
    assert hit and "32-bit ELF file (ELFCLASS32)" in hit[0].title and hit[0].level.value == "error"
    loader = area(host, facts, "loader").summary
    assert "all NEEDED libraries resolve" not in loader and "cannot use libc10.so" in loader


def test_check_symlink_loop_in_libtorch(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": str(tmp_path / "a"), "Torch_DIR": str(tmp_path / "b"),
                                                       "LD_LIBRARY_PATH": str(tmp_path / "a")})
    assert result.returncode == 1, result.stderr
    invalid = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert any(f"LIBTORCH={tmp_path / 'a'} is a symbolic link loop" in f["title"] for f in invalid)


@pytest.mark.parametrize("make, says", [
    (lambda p: p.write_text("not a tree\n"), "is a file, not a directory"),
    (lambda p: os.mkfifo(p), "is a named pipe, not a directory"),
    (lambda p: None, "does not exist"),
])
def test_check_says_what_LIBTORCH_names_instead_of_a_directory(tmp_path, make, says):
    target = tmp_path / "libtorch"
    make(target)
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": str(target)})
    assert result.returncode == 1, result.stderr
    candidate = next(c for c in json.loads(result.stdout)["facts"]["libtorch"]["candidates"] if c["root"] == str(target))
    assert candidate["exists"] is False
    titles = [f["title"] for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert f"LIBTORCH={target} {says}" in titles


def test_check_names_a_device_and_a_file_in_the_path(tmp_path):
    (tmp_path / "file").write_text("x")
    for target, says in (("/dev/null", "is a device, not a directory"),
                         (str(tmp_path / "file" / "libtorch"), "a file stands where one of its parent folders should be")):
        result = doctor_subprocess("check", env={"LIBTORCH": target})
        assert result.returncode == 1 and f"LIBTORCH={target} " in result.stdout and says in result.stdout, result.stdout


@pytest.mark.parametrize("record", ["[" * 100_000 + "]" * 100_000, "[1, 2]", '{"version": ' + "9" * 5000 + "}", "\xff{"],
                         ids=["deeply-nested", "a-list", "huge-number", "not-utf8"])
def test_check_install_record_hostile(tmp_path, abi_libs, record):
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "torch-doctor.json").write_text(record, errors="surrogateescape")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})
    install = inspect_tree(host, "/opt/libtorch", ["LIBTORCH"], [])
    assert install.record is None and install.version == "2.13.0"


@pytest.mark.parametrize("lock, says", [
    ("lib/libc10.so", "this user may not read lib/libc10.so, lib/libtorch.so (permission denied)"),
    ("include", "this user may not read include (permission denied)"),
])
def test_a_tree_this_user_may_not_read_is_named_as_such_not_as_broken(lock, says):
    """A tree unpacked by root under umask 077: complete on disk, useless to other users. The
    report names the permissions and chmod, not 'damaged, fetch it again'."""
    top = world_tmp_dir("denied-tree-")
    try:
        root = make_tree(top / "libtorch", "2.13.0", "cpu", abi_line="1", libc10=torch_root() / "lib/libc10.so")
        shutil.copy(torch_root() / "lib/libc10.so", root / "lib/libtorch.so")
        for path in ([root / "lib/libc10.so", root / "lib/libtorch.so"] if lock.startswith("lib/") else [root / lock]):
            path.chmod(0o600 if path.is_file() else 0o700)
        host = dataclasses.replace(Host.from_system(), env={**os.environ, "LIBTORCH": str(root)})

        def report():
            facts = gather_facts(host)
            return [(f.id, f.title, f.fix, f.area) for a in build_areas(facts, host) for f in a.findings]

        got = as_another_user(report)
    finally:
        shutil.rmtree(top)
    invalid = [g for g in got if g[0] == "libtorch.path-invalid"]
    assert [(title, fix) for _, title, fix, _ in invalid] == [
        (f"{root}: {says}", f"sudo chmod -R a+rX {root}   (or ask the tree's owner to)")]
    assert not any("not a usable" in title or "not a complete" in title for _, title, _, _ in got)


@pytest.mark.parametrize("named", ["lib", "include", "share/cmake/Torch", ".."])
def test_LIBTORCH_one_level_off_gets_the_root_as_its_fix(tmp_path, abi_libs, named):
    """LIBTORCH naming the tree's lib/ (or include/, or the CMake folder), or the folder the zip was
    unpacked into: the finding names the root one level off and the export that fixes it; emit too."""
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    value = str((root / named).resolve()) if named != ".." else str(root.parent)
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": value})
    invalid = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert [(f["title"], f["fix"]) for f in invalid] == [(
        f"LIBTORCH={value} is not a complete libtorch (no include/torch, no lib/libc10.so); the libtorch root is {root}",
        f"export LIBTORCH={root}")], result.stdout
    emitted = doctor_subprocess("emit", "setenv", env={"LIBTORCH": value})
    assert emitted.returncode == 1 and f"hint: pass --libtorch {root}" in emitted.stderr, emitted.stderr


def test_a_tree_of_links_into_a_removed_store_says_which_link(tmp_path, abi_libs):
    """A tree whose files are symbolic links into a store that was cleaned (a Nix garbage
    collection, a moved conda env): each broken part named with what it is, not "does not exist"."""
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (root / "lib/libc10.so").unlink()
    (root / "lib/libc10.so").symlink_to(tmp_path / "store/gone/lib/libc10.so")
    shutil.rmtree(root / "include/torch")
    (root / "include/torch").symlink_to("torch")  # a loop
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": str(root)})
    titles = [f["title"] for f in json.loads(result.stdout)["findings"] if f["title"].startswith("LIBTORCH=")]
    assert titles == [f"LIBTORCH={root} is not a complete libtorch (include/torch is a symbolic link loop, "
                      "lib/libc10.so is a symbolic link to a path that does not exist)"], titles
    candidate = json.loads(result.stdout)["facts"]["libtorch"]["candidates"][0]
    assert candidate["missing"] == {f"{root}/include/torch": "loop", f"{root}/lib/libc10.so": "dangling"}
    gone = tmp_path / "gone"
    gone.symlink_to(tmp_path / "nowhere")
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": str(gone)})
    titles = [f["title"] for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert titles == [f"LIBTORCH={gone} is a symbolic link to a path that does not exist"], titles


def test_a_relative_LIBTORCH_is_the_folder_it_names_from_here(tmp_path, abi_libs):
    """LIBTORCH=libtorch (as tutorials set it) named paths that depend on where a build or program
    starts: emit wrote LD_LIBRARY_PATH='libtorch/lib' (the trap loader.relative-entry reports), and
    check advised it. Now both use the folder it names from where the doctor runs."""
    root = make_tree(tmp_path / "proj/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    emitted = doctor_subprocess("emit", "setenv", "--shell", "bash", env={"LIBTORCH": "libtorch"}, cwd=tmp_path / "proj")
    assert emitted.returncode == 0, emitted.stderr
    assert f"export LIBTORCH='{root}'" in emitted.stdout
    assert f"_torch_doctor_prepend LD_LIBRARY_PATH '{root}/lib'" in emitted.stdout
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": "libtorch"}, cwd=tmp_path / "proj")
    data = json.loads(result.stdout)
    assert data["facts"]["libtorch"]["candidates"][0]["root"] == str(root)
    fixes = [f["fix"] for f in data["findings"] if f["id"] == "loader.library-not-found"]
    assert fixes and fixes[0].startswith(f'export LD_LIBRARY_PATH="{root}/lib$'), fixes
    missing = doctor_subprocess("check", "--json", env={"LIBTORCH": "nope"}, cwd=tmp_path / "proj")
    titles = [f["title"] for f in json.loads(missing.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert titles == [f"LIBTORCH=nope ({tmp_path}/proj/nope) does not exist"], titles


def test_LIBTORCH_with_a_blank_at_the_end_is_shown_quoted_and_fixed(tmp_path, abi_libs):
    """`export LIBTORCH="$(cat path.txt)"` keeping a trailing space: invisible in the message unless
    quoted; the root without it is named, with the export that fixes it."""
    root = make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    result = doctor_subprocess("check", "--json", env={"LIBTORCH": f"{root} "})
    invalid = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert [(f["title"], f["fix"]) for f in invalid] == [(
        f"LIBTORCH='{root} ' does not exist; the libtorch root is {root}", f"export LIBTORCH={root}")]
    # blanks alone name no folder: not the current one, even where a libtorch/ lies
    blank = doctor_subprocess("check", "--json", env={"LIBTORCH": "   "}, cwd=tmp_path / "opt")
    titles = [f["title"] for f in json.loads(blank.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert titles == ["LIBTORCH='   ' does not exist"], titles


def test_a_quoted_tilde_in_LIBTORCH_is_named_with_the_folder_it_meant(tmp_path, abi_libs):
    """`export LIBTORCH="~/libtorch"`: in quotes (and in Cargo's [env], a Dockerfile ENV, GitHub
    Actions' env:) the ~ stays a folder name; what real bash exports is what check is given."""
    home = tmp_path / "home"
    root = make_tree(home / "libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    env = {**os.environ, "HOME": str(home)}

    def exported(assignment: str) -> str:
        return subprocess.run(["bash", "-c", f'export {assignment}; printf %s "$LIBTORCH"'], env=env,
                              capture_output=True, text=True, check=True).stdout

    quoted, bare = exported('LIBTORCH="~/libtorch"'), exported("LIBTORCH=~/libtorch")
    assert (quoted, bare) == ("~/libtorch", str(root))  # the shell's own rule
    work = tmp_path / "work"
    work.mkdir()
    result = doctor_subprocess("check", "--json", env={"HOME": str(home), "LIBTORCH": quoted}, cwd=work)
    data = json.loads(result.stdout)
    assert data["facts"]["libtorch"]["candidates"][0]["unexpanded_tilde"] == str(root)
    (finding,) = [f for f in data["findings"] if f["id"] == "libtorch.path-invalid"]
    assert finding["title"] == (f"LIBTORCH='~/libtorch' ({work}/~/libtorch) does not exist: its ~ was not expanded; "
                                f"the libtorch root is {root}")
    assert finding["fix"] == f"export LIBTORCH={root}"
    # expanded by the shell, it is simply the tree
    result = doctor_subprocess("check", "--json", env={"HOME": str(home), "LIBTORCH": bare}, cwd=work)
    candidate = json.loads(result.stdout)["facts"]["libtorch"]["candidates"][0]
    assert (candidate["root"], candidate["complete"], candidate["unexpanded_tilde"]) == (str(root), True, None)
    # a ~ that names nothing either way still says so, without a root to point at
    result = doctor_subprocess("check", "--json", env={"HOME": str(home), "LIBTORCH": "~/nothing"}, cwd=work)
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert finding["title"].endswith("does not exist: its ~ was not expanded")
    assert f"Expanded, it would be {home}/nothing." in finding["detail"]


def test_a_tilde_in_cmakes_variables_is_expanded_as_cmake_does(tmp_path, wheel_root):
    """CMake expands a leading ~ itself (so `cmake -DCMAKE_PREFIX_PATH=~/libtorch` works although no
    shell expanded it): the real cmake finds Torch through Torch_DIR='~/…' and CMAKE_PREFIX_PATH='~/…',
    and check takes the same tree, where a literal ~ in LIBTORCH is a folder named ~ for tch-rs."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is needed (apt-get install cmake; scripts/test installs it)")
    home = tmp_path / "home"
    home.mkdir()
    (home / "libtorch").symlink_to(wheel_root)
    project = tmp_path / "project"
    (project / "build").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(t CXX)\n"
                                            "find_package(Torch REQUIRED)\nmessage(STATUS \"prefix=${TORCH_INSTALL_PREFIX}\")\n")
    for variable, value in (("Torch_DIR", "~/libtorch/share/cmake/Torch"), ("CMAKE_PREFIX_PATH", "~/libtorch")):
        env = {k: v for k, v in os.environ.items() if k not in ("Torch_DIR", "CMAKE_PREFIX_PATH")}
        configured = subprocess.run([cmake, "-S", str(project), "-B", str(project / "build" / variable)],
                                    env={**env, "HOME": str(home), variable: value}, capture_output=True, text=True,
                                    timeout=300)
        assert f"-- prefix={home}/libtorch" in configured.stdout, configured.stdout[-2000:] + configured.stderr[-2000:]
        data = json.loads(doctor_subprocess("check", "--json", env={"HOME": str(home), variable: value}).stdout)
        (candidate,) = [c for c in data["facts"]["libtorch"]["candidates"] if variable in c["origins"]]
        assert (candidate["root"], candidate["complete"]) == (f"{home}/libtorch", True)
        assert not [f for f in data["findings"] if f["id"] == "libtorch.path-invalid"]
