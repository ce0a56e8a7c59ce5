"""System, toolchain and loader probes on fake roots, fake compilers and real ELF files."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from testsupport.support import make_tree

from doctor.check import build_areas, gather_facts
from doctor.diagnose.toolchain import toolchain_area
from doctor.host import Host
from doctor.probe.ldcache import parse_ld_so_cache
from doctor.probe.loader import detect_loader
from doctor.probe.system import detect_system
from doctor.probe.toolchain import detect_toolchain

OLD_GXX = """#!/bin/sh
# g++ 7.5 as Ubuntu 18.04 ships it: knows c++17 but not c++20.
case "$*" in
  --version) printf 'g++ (Ubuntu 7.5.0-3ubuntu1~18.04) 7.5.0\\nCopyright (C) 2017 Free Software Foundation, Inc.\\n'; exit 0;;
  *-std=c++26*|*-std=c++23*|*-std=c++20*) echo "g++: error: unrecognized command line option '$1'; did you mean '-std=c++2a'?" >&2; exit 1;;
  *) cat >/dev/null; exit 0;;
esac
"""


def write_exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_system_facts_from_a_fake_root(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-18-amd64\n")
    (tmp_path / "proc/meminfo").write_text("MemTotal:        8000000 kB\n")
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\nmodel name\t: AMD EPYC 9654\nflags\t\t: avx2 avx512f\n")
    (tmp_path / "etc/os-release").write_text('PRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    host = Host.for_test(tmp_path, glibc="2.35")
    s = detect_system(host, {}, "/home/user/.cache/libtorch")
    assert (s.distribution, s.kernel, s.cpu_model) == ("Ubuntu 22.04.4 LTS", "6.1.0-18-amd64", "AMD EPYC 9654")
    assert s.simd == ["avx2", "avx512f"] and s.memory_bytes == 8000000 * 1024 and s.glibc == "2.35"
    assert s.cache_free_bytes and s.cache_free_bytes > 0


def test_old_compiler_cannot_build_a_cxx20_libtorch(tmp_path, abi_libs):
    write_exe(tmp_path / "bin/g++", OLD_GXX)
    make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", cxx_standard=20, libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path)
    facts = gather_facts(host)
    gxx = facts["toolchain"].compilers[0]
    assert (gxx.version, gxx.max_std) == ("7.5.0", 17)
    finding = next(f for a in build_areas(facts, host) for f in a.findings if f.id == "cxx.std-too-old")
    assert "-std=c++17" in finding.title and "C++20" in finding.title


def test_cxxflags_abi_that_contradicts_libtorch(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/libtorch", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"CXXFLAGS": "-O2 -D_GLIBCXX_USE_CXX11_ABI=0", "PATH": str(tmp_path / "none")})
    facts = gather_facts(host)
    area = toolchain_area(facts["toolchain"], facts["libtorch"].active_install)
    finding = next(f for f in area.findings if f.id == "abi.mismatch")
    assert "CXXFLAGS" in finding.title and "-D_GLIBCXX_USE_CXX11_ABI=1" in finding.fix
    assert any(f.id == "toolchain.compiler-missing" for f in area.findings)


def test_hung_compiler_times_out_and_the_check_goes_on(tmp_path):
    write_exe(tmp_path / "bin/g++", "#!/bin/sh\nexec /bin/sleep 30\n")
    host = Host.for_test(tmp_path)
    facts = detect_toolchain(host, timeout=0.3)
    assert facts.compilers[0].version is None
    assert facts.problems[0].endswith("g++: did not answer in 0.3 s")


def test_needed_library_that_resolves_nowhere(tmp_path, abi_libs):
    """A real libtorch_cpu.so linked against a libfoo that is then removed."""
    tree = make_tree(tmp_path / "opt/libtorch", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    build = tmp_path / "build"
    build.mkdir()
    (build / "foo.c").write_text("int foo(void) { return 1; }\n")
    (build / "cpu.c").write_text("#include <stdio.h>\nint foo(void); int cpu(void) { puts(\"x\"); return foo(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", build / "libfoo_missing.so", build / "foo.c"], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", tree / "lib/libtorch_cpu.so", build / "cpu.c",
                    f"-L{build}", "-lfoo_missing", "-Wl,-rpath,$ORIGIN"], check=True)
    cache = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes())
    host = Host.for_test(tmp_path)
    loader = detect_loader(host, "/opt/libtorch/lib", cache)
    assert loader.unresolved == ["libtorch_cpu.so → libfoo_missing.so"]
    libc = next(n for v in loader.libraries if v.library == "libtorch_cpu.so" for n in v.needed if n.name == "libc.so.6")
    assert libc.via == "ld.so.cache"
    shutil.copy(build / "libfoo_missing.so", tree / "lib")
    again = detect_loader(host, "/opt/libtorch/lib", cache)
    assert again.unresolved == []
    cpu = next(v for v in again.libraries if v.library == "libtorch_cpu.so")
    assert next(n for n in cpu.needed if n.name == "libfoo_missing.so").via == "RUNPATH"


def test_glibcxx_newer_than_the_system_has(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/libtorch", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path)
    facts = gather_facts(host)
    facts["system"].glibcxx_max = "GLIBCXX_3.4.9"  # an old distribution's libstdc++
    needs = facts["libtorch"].active_install.glibc_needs["libstdc++.so.6"]
    assert any(n.startswith("GLIBCXX_3.4.") for n in needs)
    finding = next(f for a in build_areas(facts, host) for f in a.findings if f.id == "glibc.too-old")
    assert "GLIBCXX_3.4.9" in finding.title


def test_a_check_run_through_sudo_says_it_describes_roots_environment(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    host = Host.for_test(tmp_path, env={"SUDO_USER": "nobody"})
    facts = gather_facts(host)
    assert facts["system"].sudo_user == "nobody"
    found = [f for a in build_areas(facts, host) for f in a.findings if f.id == "system.sudo"]
    assert [(f.level.value, f.title, f.fix) for f in found] == [(
        "warning", "running as root through sudo: this is root's environment, not nobody's",
        "run `doctor check` as nobody, without sudo (a system-wide install is found from there too)")]
    for env in ({}, {"SUDO_USER": "root"}):  # not through sudo; `sudo -s` from a root shell
        plain = Host.for_test(tmp_path, env=env)
        assert gather_facts(plain)["system"].sudo_user is None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # `sudo -u alice`: not root
    assert gather_facts(Host.for_test(tmp_path, env={"SUDO_USER": "nobody"}))["system"].sudo_user is None


def test_a_musl_system_is_told_that_libtorch_needs_glibc(tmp_path):
    """Alpine: no glibc answers, musl's loader is in /lib; the tree is the real wheel's libc10
    (it asks for GLIBC_2.x)."""
    from testsupport.support import torch_root

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/ld-musl-x86_64.so.1").write_bytes(b"")
    make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", cxx_standard=20, libc10=torch_root() / "lib/libc10.so")
    host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"}, glibc=None)
    facts = gather_facts(host)
    assert facts["system"].libc == "musl"
    found = [f for a in build_areas(facts, host) for f in a.findings if f.id.startswith("glibc.")]
    assert [f.id for f in found] == ["glibc.missing"]
    assert found[0].title.startswith("libtorch needs glibc (GLIBC_2.") and "python:3.x-slim" in found[0].fix
    glibc_host = Host.for_test(tmp_path, env={"LIBTORCH": "/opt/libtorch"})  # glibc 2.36 answers: not musl
    assert gather_facts(glibc_host)["system"].libc == "glibc"


def test_ld_preload_is_read_as_the_loader_reads_it(tmp_path, abi_libs):
    """Spaces and colons both separate; a path is taken as it is, a bare name searched like a
    NEEDED library (here in LD_LIBRARY_PATH); the verdicts: missing ones, a libtorch library,
    a C++ runtime (details only)."""
    from doctor.diagnose.loader import loader_area

    make_tree(tmp_path / "opt/libtorch", "2.13.0", "cpu", libc10=abi_libs["cxx11"])
    (tmp_path / "opt/alloc").mkdir()
    (tmp_path / "opt/alloc/libjemalloc.so.2").write_bytes(b"")
    (tmp_path / "opt/gcc/lib").mkdir(parents=True)
    (tmp_path / "opt/gcc/lib/libstdc++.so.6").write_bytes(b"")
    preload = "libjemalloc.so.2 /opt/gone/libtcmalloc.so:/opt/libtorch/lib/libc10.so  /opt/gcc/lib/libstdc++.so.6"
    host = Host.for_test(tmp_path, env={"LD_PRELOAD": preload, "LD_LIBRARY_PATH": "/opt/alloc"})
    loader = detect_loader(host, None, {})
    assert [(r.name, r.path, r.via) for r in loader.preload] == [
        ("libjemalloc.so.2", "/opt/alloc/libjemalloc.so.2", "LD_LIBRARY_PATH"),
        ("/opt/gone/libtcmalloc.so", None, "LD_PRELOAD"),
        ("/opt/libtorch/lib/libc10.so", "/opt/libtorch/lib/libc10.so", "LD_PRELOAD"),
        ("/opt/gcc/lib/libstdc++.so.6", "/opt/gcc/lib/libstdc++.so.6", "LD_PRELOAD")]
    area = loader_area(loader)  # no active libtorch: the preload verdicts still stand
    assert [f.title for f in area.findings] == [
        "LD_PRELOAD names libraries the loader cannot find: /opt/gone/libtcmalloc.so",
        "LD_PRELOAD loads libtorch libraries into every program: /opt/libtorch/lib/libc10.so"]
    assert {f.id for f in area.findings} == {"loader.preload"}
    assert any("LD_PRELOAD puts /opt/gcc/lib/libstdc++.so.6 before libtorch's own" in d for d in area.details)
    assert detect_loader(Host.for_test(tmp_path), None, {}).preload == []


def test_an_empty_ld_library_path_entry_is_the_current_folder_and_the_fix_removes_it(tmp_path):
    """ld.so reads ':/a', '/a:' and '/a::b' as including the folder a program starts in (checked
    with a real program in the test below); the fix line, run by real shells, leaves '/a:/b'."""
    from doctor.diagnose.loader import loader_area

    for value, empty in ((":/a", True), ("/a:", True), ("/a::/b", True), ("/a:/b", False)):
        loader = detect_loader(Host.for_test(tmp_path, env={"LD_LIBRARY_PATH": value}), None, {})
        assert loader.empty_entry is empty, value
    area = loader_area(detect_loader(Host.for_test(tmp_path, env={"LD_LIBRARY_PATH": ":/a::/b:"}), None, {}))
    (finding,) = [f for f in area.findings if f.id == "loader.empty-entry"]
    command = finding.fix.split("   (")[0]
    for shell in ("dash", "bash"):
        assert shutil.which(shell), f"{shell} is needed (scripts/test installs it)"
        out = subprocess.run([shell, "-c", command + '; printf %s "$LD_LIBRARY_PATH"'], capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ":/a::/b:"})
        assert out.stdout == "/a:/b", (shell, out.stderr)


def test_the_loader_really_searches_the_current_folder_for_an_empty_entry(tmp_path):
    """The fact the finding rests on, with gcc and glibc's ld.so."""
    (tmp_path / "here").mkdir()
    (tmp_path / "foo.c").write_text("int foo(void) { return 42; }\n")
    (tmp_path / "main.c").write_text("int foo(void); int main(void) { return foo() == 42 ? 0 : 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", tmp_path / "here/libfoo.so", tmp_path / "foo.c"], check=True)
    subprocess.run(["gcc", "-o", tmp_path / "main", tmp_path / "main.c", f"-L{tmp_path / 'here'}", "-lfoo"], check=True)
    runs = {value: subprocess.run([tmp_path / "main"], cwd=tmp_path / "here", env={"LD_LIBRARY_PATH": value},
                                  capture_output=True).returncode
            for value in ("/nonexistent", "/nonexistent:", ":/nonexistent", "/a::/b")}
    assert runs == {"/nonexistent": 127, "/nonexistent:": 0, ":/nonexistent": 0, "/a::/b": 0}


def test_a_relative_ld_library_path_entry_is_found_from_where_a_program_starts(tmp_path):
    """ld.so takes `here` from the folder a program is started in (a real program, twice); the
    doctor names such entries with the folder each names from its own, and leaves $ORIGIN alone."""
    from doctor.diagnose.loader import loader_area

    (tmp_path / "here").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "foo.c").write_text("int foo(void) { return 42; }\n")
    (tmp_path / "main.c").write_text("int foo(void); int main(void) { return foo() == 42 ? 0 : 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", tmp_path / "here/libfoo.so", tmp_path / "foo.c"], check=True)
    subprocess.run(["gcc", "-o", tmp_path / "main", tmp_path / "main.c", f"-L{tmp_path / 'here'}", "-lfoo"], check=True)
    runs = [subprocess.run([tmp_path / "main"], cwd=cwd, env={"LD_LIBRARY_PATH": "here"}, capture_output=True).returncode
            for cwd in (tmp_path, tmp_path / "build")]
    assert runs == [0, 127]

    host = Host.for_test(tmp_path, env={"LD_LIBRARY_PATH": "libtorch/lib:$ORIGIN/../lib:/opt/x:./lib"})
    loader = detect_loader(host, None, {})
    assert loader.relative_entries == {"libtorch/lib": "/work/libtorch/lib", "./lib": "/work/lib"}
    (finding,) = [f for f in loader_area(loader).findings if f.id == "loader.relative-entry"]
    assert finding.title.startswith("LD_LIBRARY_PATH has relative entries (libtorch/lib, ./lib)")
    assert "libtorch/lib → /work/libtorch/lib, ./lib → /work/lib" in finding.fix
    assert detect_loader(Host.for_test(tmp_path, env={"LD_LIBRARY_PATH": "/a:$ORIGIN"}), None, {}).relative_entries == {}
    # a ~ the shell did not expand is a folder named ~ for ld.so too (real runs); the fix means the home
    home = tmp_path / "home"
    (home / "lib").mkdir(parents=True)
    (tmp_path / "here/libfoo.so").rename(home / "lib/libfoo.so")
    runs = [subprocess.run([tmp_path / "main"], cwd=tmp_path, env={"HOME": str(home), "LD_LIBRARY_PATH": value},
                           capture_output=True).returncode for value in ("~/lib", str(home / "lib"))]
    assert runs == [127, 0]
    host = Host.for_test(tmp_path, env={"HOME": str(home), "LD_LIBRARY_PATH": "~/lib"})
    (finding,) = [f for f in loader_area(detect_loader(host, None, {})).findings if f.id == "loader.relative-entry"]
    assert f"'~/lib' → {home}/lib" in finding.fix and '"$HOME/…"' in finding.fix
    long = "x" * 100_000  # shown clipped: a 100 KB title before
    (finding,) = [f for f in loader_area(detect_loader(Host.for_test(tmp_path, env={"LD_LIBRARY_PATH": long}), None, {})).findings
                  if f.id == "loader.relative-entry"]
    assert len(finding.title) < 400 and len(finding.fix) < 600


def test_a_preloaded_libtorch_library_is_the_one_programs_get(tmp_path, wheel_root):
    """ld.so takes an LD_PRELOAD library for every NEEDED entry of its name: a program linked
    with -lc10 and no rpath starts with the wheel's libc10.so preloaded (run here for real), so
    the loader view says so instead of "not found", and only the others are missing."""
    from doctor.diagnose.loader import loader_area
    from doctor.probe.loader import read_ld_cache

    lib = wheel_root / "lib"
    src = tmp_path / "main.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "needs-c10"
    subprocess.run(["gcc", "-o", str(exe), str(src), "-Wl,--no-as-needed", f"-L{lib}", "-lc10"], check=True)
    alone = subprocess.run([str(exe)], capture_output=True, text=True, env={})
    assert alone.returncode == 127 and "libc10.so: cannot open shared object file" in alone.stderr
    preload = str(lib / "libc10.so")
    assert subprocess.run([str(exe)], capture_output=True, env={"LD_PRELOAD": preload}).returncode == 0

    host = Host(env={"LD_PRELOAD": preload})
    loader = detect_loader(host, str(lib), read_ld_cache(host))
    views = {v.library: v for v in loader.libraries}
    assert (views["libc10.so"].for_programs.path, views["libc10.so"].for_programs.via) == (preload, "LD_PRELOAD")
    assert [(r.path, r.via) for r in views["libtorch_cpu.so"].needed if r.name == "libc10.so"] == [(preload, "LD_PRELOAD")]
    area = loader_area(loader)
    missing = next(f for f in area.findings if f.id == "loader.library-not-found")
    assert missing.title.startswith("libtorch.so, libtorch_cpu.so not on the loader path")
    assert "'libtorch.so: cannot open shared object file'" in missing.detail
    assert f"libc10.so: via LD_PRELOAD → {preload}" in area.details


def test_a_libc10_earlier_on_the_loader_path_is_the_one_programs_get(tmp_path, wheel_root):
    """A copy of libc10.so in an earlier LD_LIBRARY_PATH entry (here a damaged one) is the one a
    program linked against the tree loads (run here for real); the loader area said "found, all
    NEEDED resolve". It is named, with the fix that puts the tree first, which really works; the
    tree's own folder reached through a symlink is the tree's file, not another."""
    from doctor.diagnose.loader import loader_area
    from doctor.probe.loader import read_ld_cache

    lib = wheel_root / "lib"
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "needs-c10"
    subprocess.run(["gcc", "-o", str(exe), str(tmp_path / "main.c"), "-Wl,--no-as-needed", f"-L{lib}", "-lc10"], check=True)
    other = tmp_path / "old/lib"
    other.mkdir(parents=True)
    (other / "libc10.so").write_bytes(b"")
    shadowed = f"{other}:{lib}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, env={"LD_LIBRARY_PATH": shadowed})
    assert run.returncode == 127 and f"{other}/libc10.so: file too short" in run.stderr

    host = Host(env={"LD_LIBRARY_PATH": shadowed})
    (finding,) = [f for f in loader_area(detect_loader(host, str(lib), read_ld_cache(host))).findings
                  if f.id == "loader.other-libtorch"]
    assert finding.title == f"programs get libc10.so from {other} (LD_LIBRARY_PATH), not from the active libtorch"
    assert f"loads {other}/libc10.so (via LD_LIBRARY_PATH)" in finding.detail
    fixed = subprocess.run(["sh", "-c", f"{finding.fix.split('   (or')[0]} && exec {exe}"], capture_output=True,
                           env={"LD_LIBRARY_PATH": shadowed})
    assert fixed.returncode == 0, fixed.stderr
    (tmp_path / "via").symlink_to(lib)
    for value in (f"{lib}:{other}", f"{tmp_path / 'via'}:{other}"):
        host = Host(env={"LD_LIBRARY_PATH": value})
        loader = detect_loader(host, str(lib), read_ld_cache(host))
        assert loader.elsewhere == [] and "loader.other-libtorch" not in [f.id for f in loader_area(loader).findings]


def test_a_cxx_naming_no_compiler_is_named_and_the_fix_lets_cmake_build(tmp_path):
    """$CXX naming a compiler that is not there: CMake (and make) take it before g++ on PATH and
    fail (run here for real); the toolchain area named only g++ and said nothing of $CXX."""
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(p CXX)\n")
    env = {"PATH": os.environ["PATH"], "CXX": "/nonexistent/g++"}
    configure = ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build")]
    failed = subprocess.run(configure, capture_output=True, text=True, env=env, timeout=120)
    assert failed.returncode != 0 and "/nonexistent/g++" in failed.stderr
    facts = detect_toolchain(Host(env=env), timeout=10)
    assert facts.cxx_missing == "/nonexistent/g++" and facts.compilers  # g++ on PATH is still probed
    (finding,) = [f for f in toolchain_area(facts, None).findings if f.id == "toolchain.compiler-missing"]
    assert finding.title.startswith("$CXX names /nonexistent/g++, which is not found")
    shutil.rmtree(tmp_path / "build")
    fixed = subprocess.run(["sh", "-c", f"{finding.fix.split('   (or')[0]} && exec {shlex.join(configure)}"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert fixed.returncode == 0, fixed.stderr
    assert detect_toolchain(Host(env={"PATH": os.environ["PATH"]}), timeout=10).cxx_missing is None
