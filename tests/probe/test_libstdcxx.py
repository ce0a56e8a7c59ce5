"""The libstdc++ the real wheel's libtorch gets, with an old conda copy (real ELF stub with the
real soname and GLIBCXX/CXXABI symbol versions) on LD_LIBRARY_PATH or in a conda prefix."""

from __future__ import annotations

from pathlib import Path

from doctor.diagnose.cuda_stack import libstdcxx_findings
from doctor.host import Host
from doctor.probe.libstdcxx import detect_libstdcxx
from doctor.probe.loader import read_ld_cache
from testsupport.elf_stubs import OLD_LIBSTDCXX_MAP, OLD_LIBSTDCXX_SRC, gxx


def _old_libstdcxx(lib: Path) -> Path:
    lib.mkdir(parents=True)
    (lib / "v.map").write_text(OLD_LIBSTDCXX_MAP)
    (lib / "s.cpp").write_text(OLD_LIBSTDCXX_SRC)
    gxx("-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libstdc++.so.6", f"-Wl,--version-script={lib / 'v.map'}",
        "-o", lib / "libstdc++.so.6", lib / "s.cpp")
    return lib / "libstdc++.so.6"


def test_system_libstdcxx_serves_the_wheel(wheel_root):
    cache = read_ld_cache(Host.from_system())
    facts = detect_libstdcxx(Host.for_test(Path("/"), {"PATH": "/usr/bin"}), str(wheel_root / "lib"), cache)
    assert facts.via == "ld.so.cache" and "GLIBCXX_3.4.30" in facts.versions
    assert any(v.startswith("GLIBCXX_3.4.") for v in facts.needs["libtorch_cpu.so"])
    assert libstdcxx_findings(facts) == []


def test_old_conda_copy_on_ld_library_path(wheel_root, tmp_path):
    old = _old_libstdcxx(tmp_path / "conda/lib")
    cache = read_ld_cache(Host.from_system())
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin", "LD_LIBRARY_PATH": str(old.parent)})
    facts = detect_libstdcxx(host, str(wheel_root / "lib"), cache)
    assert (facts.path, facts.via) == (str(old), "LD_LIBRARY_PATH")
    [finding] = libstdcxx_findings(facts)
    assert finding.id == "glibc.too-old" and "GLIBCXX_3.4.21" in finding.title


def test_conda_python_loads_its_own(wheel_root, tmp_path):
    old = _old_libstdcxx(tmp_path / "env/lib")
    cache = read_ld_cache(Host.from_system())
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin", "CONDA_PREFIX": str(tmp_path / "env")},
                         python=str(tmp_path / "env/bin/python"))
    facts = detect_libstdcxx(host, str(wheel_root / "lib"), cache, host.python)
    assert facts.path == str(old) and facts.via.startswith("conda python")
    assert [f.id for f in libstdcxx_findings(facts)] == ["glibc.too-old"]
    # Another interpreter (not the conda env's) is not affected by that environment's lib/.
    facts = detect_libstdcxx(host, str(wheel_root / "lib"), cache, "/usr/bin/python3")
    assert facts.via == "ld.so.cache"
