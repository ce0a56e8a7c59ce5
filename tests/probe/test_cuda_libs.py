"""CUDA libraries of a torch CUDA wheel, built here as real ELF stubs with the real sonames,
RUNPATHs and symbol versions, beside real pip metadata directories."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from doctor.diagnose.cuda_libs import cuda_libs_area, older_than
from doctor.host import Host
from doctor.probe.cuda_libs import detect_cuda_libs, nvjitlink_version, parse_header_version, parse_metadata

METADATA = Path(__file__).resolve().parent.parent / "fixtures" / "wheel-metadata" / "torch-2.6.0-cu124.METADATA"


def cc(*args) -> None:
    exe = shutil.which("gcc")
    if exe is None:
        pytest.fail("gcc is needed (scripts/test installs it)")
    subprocess.run([exe, *map(str, args)], check=True, capture_output=True)


def stub(path: Path, soname: str, defines: list[str], uses: list[str] = (), link: list[str] = (),
         version_script: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / (path.name + ".c")
    body = [f"extern int {u}(void);" for u in uses]
    body += [f"int {d}(void) {{ return 0; }}" for d in defines]
    body.append("int stub_entry(void) { return 0" + "".join(f" + {u}()" for u in uses) + "; }")
    src.write_text("\n".join(body) + "\n")
    args = ["-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", path, src, *link]
    if version_script:
        (path.parent / "v.map").write_text(version_script)
        args.append(f"-Wl,--version-script={path.parent / 'v.map'}")
    cc(*args)
    src.unlink()
    return path


def dist(site: Path, name: str, version: str) -> None:
    d = site / f"{name.replace('-', '_')}-{version}.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")


def header(path: Path, prefix: str, version: str, patch: str = "PATCHLEVEL") -> None:
    major, minor, p = version.split(".")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#define {prefix}_MAJOR {major}\n#define {prefix}_MINOR {minor}\n#define {prefix}_{patch} {p}\n")


def nvjitlink(path: Path, minor: int) -> Path:
    names = [f"__nvJitLinkComplete_12_{minor}", f"__nvJitLinkCreate_12_{minor}"]
    script = "libnvJitLink.so.12 { global: " + "; ".join(names) + "; local: *; };\n"
    return stub(path, "libnvJitLink.so.12", names, version_script=script)


def nccl(path: Path, version: str, with_register: bool) -> Path:
    stub(path, "libnccl.so.2", ["ncclCommInitRank"] + (["ncclCommRegister"] if with_register else []))
    header(path.parent.parent / "include" / "nccl.h", "NCCL", version, patch="PATCH")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """site-packages of a torch 2.6.0+cu124 install: torch/lib/libtorch_cuda.so and nvidia/*/lib."""
    site = tmp_path_factory.mktemp("cuda-libs") / "site"
    nv = site / "nvidia"
    nccl(nv / "nccl/lib/libnccl.so.2", "2.21.5", with_register=True)
    jit = nvjitlink(nv / "nvjitlink/lib/libnvJitLink.so.12", 4)
    stub(nv / "cusparse/lib/libcusparse.so.12", "libcusparse.so.12", ["cusparseCreate"], ["__nvJitLinkComplete_12_4"],
         [f"-L{jit.parent}", "-l:libnvJitLink.so.12", "-Wl,-rpath,$ORIGIN/../../nvjitlink/lib"])
    stub(nv / "cudnn/lib/libcudnn.so.9", "libcudnn.so.9", ["cudnnCreate"])
    header(nv / "cudnn/include/cudnn_version.h", "CUDNN", "9.1.0")
    runpath = ":".join(f"$ORIGIN/../../nvidia/{d}/lib" for d in ("nccl", "cusparse", "cudnn", "nvjitlink"))
    stub(site / "torch/lib/libtorch_cuda.so", "libtorch_cuda.so", ["torch_cuda_entry"],
         ["ncclCommRegister", "cusparseCreate", "cudnnCreate"],
         [f"-L{nv}/nccl/lib", "-l:libnccl.so.2", f"-L{nv}/cusparse/lib", "-l:libcusparse.so.12",
          f"-L{nv}/cudnn/lib", "-l:libcudnn.so.9", f"-Wl,-rpath,{runpath}", "-Wl,--enable-new-dtags"])
    for name, version in (("nvidia-nccl-cu12", "2.21.5"), ("nvidia-nvjitlink-cu12", "12.4.127"),
                          ("nvidia-cusparse-cu12", "12.3.1.170"), ("nvidia-cudnn-cu12", "9.1.0.70")):
        dist(site, name, version)
    (site / "torch-2.6.0.dist-info").mkdir()
    shutil.copy(METADATA, site / "torch-2.6.0.dist-info" / "METADATA")
    return site


def _run(site: Path, env: dict | None = None, sys_path=None):
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin", **(env or {})}, sys_path=sys_path or [str(site)])
    facts = detect_cuda_libs(host, str(site / "torch/lib"), str(site / "torch"), {})
    return facts, cuda_libs_area(facts)


def _ids(area):
    return sorted((f.id, f.level.value) for f in area.findings)


def test_parsers():
    name, version, requires = parse_metadata(METADATA.read_text())
    assert (name, version) == ("torch", "2.6.0") and len([r for r in requires if r.startswith("nvidia-")]) == 13
    assert parse_header_version("#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n", "CUDNN") == "9.1.0"
    assert nvjitlink_version({"__nvJitLinkComplete_12_4", "__nvJitLinkCreate_12_1", "other"}) == "12.4"
    assert older_than("2.18.3", "==2.21.5") == "2.21.5" and older_than("9.1.0", "==9.1.0.70") is None
    assert older_than("12.4.127", ">=12.4") is None and older_than("9.0.0", "==9.1.0.70") == "9.1.0.70"


def test_clean_wheel(wheel):
    facts, area = _run(wheel)
    got = {lib.key: (lib.via, lib.version, lib.version_source) for lib in facts.libraries}
    assert got == {
        "nccl": ("RUNPATH", "2.21.5", "nccl.h"),
        "cusparse": ("RUNPATH", "12.3.1.170", "nvidia-cusparse-cu12 (pip)"),
        "cudnn": ("RUNPATH", "9.1.0", "cudnn_version.h"),
        "nvJitLink": ("RUNPATH", "12.4", "nvJitLink symbols"),
    }
    assert {e.package: e.specifier for e in facts.expected}["nvidia-nccl"] == "==2.21.5"
    assert area.findings == [], [f.title for f in area.findings]


def test_system_nccl_on_ld_library_path_shadows_and_lacks_symbols(wheel, tmp_path):
    old = nccl(tmp_path / "usr/lib/libnccl.so.2", "2.18.3", with_register=False)
    facts, area = _run(wheel, {"LD_LIBRARY_PATH": str(old.parent)})
    lib = next(x for x in facts.libraries if x.key == "nccl")
    assert (lib.path, lib.via, lib.version) == (str(old), "LD_LIBRARY_PATH", "2.18.3")
    assert lib.missing_symbols == ["ncclCommRegister"]
    assert _ids(area) == [("cuda.library-shadowed", "warning"), ("cuda.library-too-old", "error")]
    too_old = next(f for f in area.findings if f.id == "cuda.library-too-old")
    assert "ncclCommRegister" in too_old.title and "remove" in too_old.fix


def test_older_nvjitlink_earlier_on_the_path(wheel, tmp_path):
    old = nvjitlink(tmp_path / "cuda-12.1/lib64/libnvJitLink.so.12", 1)
    facts, area = _run(wheel, {"LD_LIBRARY_PATH": str(old.parent)})
    lib = next(x for x in facts.libraries if x.key == "nvJitLink")
    assert (lib.consumer, lib.version, lib.missing_symbols) == ("libcusparse.so.12", "12.1", ["__nvJitLinkComplete_12_4"])
    assert ("cuda.library-too-old", "error") in _ids(area)


def test_same_version_elsewhere_is_only_shadowed(wheel, tmp_path):
    copy = nccl(tmp_path / "other/lib/libnccl.so.2", "2.21.5", with_register=True)
    facts, area = _run(wheel, {"LD_LIBRARY_PATH": str(copy.parent)})
    assert _ids(area) == [("cuda.library-shadowed", "warning")]


def test_two_cuda_majors_of_one_package(wheel, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(wheel, site, symlinks=True)
    dist(site, "nvidia-nccl-cu13", "2.27.7")
    facts, area = _run(site)
    assert _ids(area) == [("cuda.library-mixed-majors", "warning")]
    assert area.findings[0].fix == "pip uninstall nvidia-nccl-cu13"


def test_cudnn_older_than_the_pin(wheel, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(wheel, site, symlinks=True)
    header(site / "nvidia/cudnn/include/cudnn_version.h", "CUDNN", "9.0.0")
    shutil.rmtree(site / "nvidia_cudnn_cu12-9.1.0.70.dist-info")
    dist(site, "nvidia-cudnn-cu12", "9.0.0.312")
    facts, area = _run(site)
    assert _ids(area) == [("cuda.library-too-old", "error")]
    assert "nvidia-cudnn-cu12==9.1.0.70" in area.findings[0].fix


def test_cpu_build_has_no_cuda_libraries(wheel_root):
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"}, sys_path=[str(wheel_root.parent)])
    facts = detect_cuda_libs(host, str(wheel_root / "lib"), str(wheel_root), {})
    assert facts.libraries == [] and facts.expected == []  # the CPU wheel pins no nvidia-* package


def test_libtorch_zip_bundled_copy_shadowed_by_ld_library_path(tmp_path):
    """A cu12x libtorch zip: libtorch_cuda.so finds its bundled lib/libnccl.so.2 through RUNPATH $ORIGIN."""
    lib = tmp_path / "libtorch/lib"
    nccl(lib / "libnccl.so.2", "2.21.5", with_register=True)
    stub(lib / "libtorch_cuda.so", "libtorch_cuda.so", ["torch_cuda_entry"], ["ncclCommRegister"],
         [f"-L{lib}", "-l:libnccl.so.2", "-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags"])
    old = nccl(tmp_path / "sys/lib/libnccl.so.2", "2.18.3", with_register=False)
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin", "LD_LIBRARY_PATH": str(old.parent)}, sys_path=[])
    facts = detect_cuda_libs(host, str(lib), None, {})
    [found] = facts.libraries
    assert (found.path, found.pip_copy, found.missing_symbols) == (str(old), str(lib / "libnccl.so.2"), ["ncclCommRegister"])
    assert _ids(cuda_libs_area(facts)) == [("cuda.library-shadowed", "warning"), ("cuda.library-too-old", "error")]
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin"}, sys_path=[])
    assert cuda_libs_area(detect_cuda_libs(host, str(lib), None, {})).findings == []


def test_hashed_bundled_sonames_are_recognised():
    from doctor.catalog.toolkit import cuda_library_for_soname

    assert [cuda_library_for_soname(n).key for n in ("libcudart-9335f6a2.so.12", "libnvToolsExt-847d78f2.so.1",
                                                      "libcublasLt.so.12")] == ["cudart", "nvtx", "cublasLt"]
    assert cuda_library_for_soname("libc10_cuda.so") is None
