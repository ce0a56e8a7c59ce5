"""Facts from fake toolkits (real banners) through the pure rules."""

from __future__ import annotations

from doctor.diagnose.cuda_stack import cuda_stack_area
from doctor.host import Host
from doctor.model import Level
from doctor.probe.cuda_toolkit import detect_cuda_toolkit
from testsupport.cuda_fakes import compiler, script, toolkit


def _area(root, env, python_cuda=None, libtorch_cuda=None):
    return cuda_stack_area(detect_cuda_toolkit(Host.for_test(root, env)), python_cuda, libtorch_cuda)


def _ids(area):
    return [(f.id, f.level) for f in area.findings]


def test_matching_toolkit_is_clean(fake_root):
    toolkit(fake_root / "usr/local/cuda-12.8", "12.8")
    compiler(fake_root / "bin", "gcc", "gcc-13")
    area = _area(fake_root, {"CUDA_HOME": "/usr/local/cuda-12.8"}, "12.8", "12.8")
    assert area.findings == [] and "nvcc 12.8.93" in area.summary


def test_major_mismatch_is_an_error_minor_a_warning(fake_root):
    toolkit(fake_root / "tk", "11.8")
    area = _area(fake_root, {"CUDA_HOME": "/tk"}, python_cuda="12.1")
    assert _ids(area) == [("cuda.toolkit-mismatch", Level.ERROR)]
    assert "The detected CUDA version (11.8) mismatches" in area.findings[0].detail
    assert "/usr/local/cuda-12.1" in area.findings[0].fix
    area = _area(fake_root, {"CUDA_HOME": "/tk"}, libtorch_cuda="11.6")
    assert _ids(area) == [("cuda.toolkit-mismatch", Level.WARNING)]


def test_no_toolkit_matters_only_for_a_cuda_build(fake_root):
    assert _area(fake_root, {}).findings == []
    area = _area(fake_root, {}, python_cuda="12.8")
    assert _ids(area) == [("cuda.toolkit-not-found", Level.WARNING)]
    assert "nvidia-cuda-nvcc-cu12" in area.findings[0].fix
    area = _area(fake_root, {"CUDA_HOME": "/gone"}, python_cuda="12.8")
    assert "CUDA_HOME=/gone does not exist" == area.findings[0].title


def test_host_compiler_too_new(fake_root):
    toolkit(fake_root / "tk", "12.4")
    compiler(fake_root / "bin", "gcc", "gcc-14")
    compiler(fake_root / "bin", "g++-13", "gcc-13")
    area = _area(fake_root, {"CUDA_HOME": "/tk"})
    assert _ids(area) == [("cuda.host-compiler-unsupported", Level.ERROR)]
    f = area.findings[0]
    assert "gcc ≤ 13" in f.title and "gcc 14.2.1" in f.title and "CUDA ≥ 12.8" in f.fix
    assert "CUDAHOSTCXX=/usr/bin/g++-13" in f.fix
    # CUDAHOSTCXX naming a supported compiler fixes it; -allow-unsupported-compiler softens it.
    assert _area(fake_root, {"CUDA_HOME": "/tk", "CUDAHOSTCXX": "g++-13"}).findings == []
    area = _area(fake_root, {"CUDA_HOME": "/tk", "NVCC_APPEND_FLAGS": "-allow-unsupported-compiler"})
    assert _ids(area) == [("cuda.host-compiler-unsupported", Level.WARNING)]


def test_clang_limit(fake_root):
    toolkit(fake_root / "tk", "12.6")
    compiler(fake_root / "bin", "clang", "clang-20")
    area = _area(fake_root, {"CUDA_HOME": "/tk", "NVCC_CCBIN": "clang"})
    assert _ids(area) == [("cuda.host-compiler-unsupported", Level.ERROR)] and "clang ≤ 18" in area.findings[0].title
    toolkit(fake_root / "tk13", "13.0")
    assert _area(fake_root, {"CUDA_HOME": "/tk13", "NVCC_CCBIN": "clang"}).findings == []


def test_path_nvcc_disagrees_with_cuda_home(fake_root):
    toolkit(fake_root / "tk", "12.8")
    toolkit(fake_root / "old", "12.1")
    area = _area(fake_root, {"CUDA_HOME": "/tk", "PATH": str(fake_root / "old/bin")}, python_cuda="12.8")
    assert _ids(area) == [("cuda.toolkit-mismatch", Level.WARNING)]
    assert "nvcc on PATH is CUDA 12.1" in area.findings[0].title


def test_nvcc_symlinked_elsewhere_gives_a_cuda_home_without_headers(fake_root):
    """/usr/local/bin/nvcc → cpp_extension's CUDA_HOME=/usr/local, which has no CUDA headers."""
    toolkit(fake_root / "usr/local/cuda", "13.0")
    toolkit(fake_root / "usr/local", "13.0", headers=False)
    area = _area(fake_root, {"PATH": str(fake_root / "usr/local/bin")}, python_cuda="13.0")
    assert _ids(area) == [("cuda.toolkit-not-found", Level.WARNING)]
    assert area.findings[0].fix == "export CUDA_HOME=/usr/local/cuda"


def test_real_machine_toolkit_against_a_cuda_build():
    """This machine's real nvcc 13.0 against the CUDA builds PyTorch ships."""
    from pathlib import Path

    facts = detect_cuda_toolkit(Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin", "CUDA_HOME": "/usr/local/cuda"}))
    assert cuda_stack_area(facts, "13.0", None).findings == []
    assert _ids(cuda_stack_area(facts, "12.8", None)) == [("cuda.toolkit-mismatch", Level.ERROR)]
    assert _ids(cuda_stack_area(facts, None, "13.2")) == [("cuda.toolkit-mismatch", Level.WARNING)]


def test_a_cuda_home_that_names_no_folder_says_what_it_names(fake_root):
    """CUDA_HOME set to a file, a dangling link, a missing path or a quoted ~/…: torch's
    _find_cuda_home takes it as written. With a CUDA build the warning says what stands there;
    without one the summary does, and nothing is flagged."""
    (fake_root / "cuda-file").write_text("")
    (fake_root / "cuda-gone").symlink_to(fake_root / "nowhere")
    (fake_root / "home/user/cuda").mkdir(parents=True)
    toolkit(fake_root / "home/user/cuda", "12.8")
    for value, said in (("/cuda-file", "is a file, not a directory"),
                        ("/cuda-gone", "is a symbolic link to a path that does not exist"),
                        ("/missing", "does not exist"),
                        ("~/cuda", "does not exist: its ~ was not expanded")):
        area = _area(fake_root, {"CUDA_HOME": value}, python_cuda="12.8")
        (finding,) = area.findings
        assert (finding.id, finding.title) == ("cuda.toolkit-not-found", f"CUDA_HOME={value} {said}")
        quiet = _area(fake_root, {"CUDA_HOME": value})
        assert quiet.findings == [] and quiet.summary == f"CUDA_HOME={value} {said} (not needed: no CUDA build of torch)"
    area = _area(fake_root, {"CUDA_HOME": "~/cuda"}, python_cuda="12.8")
    assert "expanded, it would be /home/user/cuda." in area.findings[0].detail
    # a toolkit folder without nvcc is still said as before
    (fake_root / "empty-tk").mkdir()
    (finding,) = _area(fake_root, {"CUDA_HOME": "/empty-tk"}, python_cuda="12.8").findings
    assert finding.title == "CUDA_HOME=/empty-tk has no bin/nvcc"


def test_a_host_compiler_that_hangs_or_fails_is_reported_with_a_toolkit(fake_root):
    """nvcc runs its host compiler for every .cu file: one that hangs on --version hangs builds too."""
    toolkit(fake_root / "tk", "12.8")
    gcc = fake_root / "bin" / "gcc"
    gcc.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    gcc.chmod(0o755)
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {"CUDA_HOME": "/tk"}), timeout=0.5)
    area = cuda_stack_area(facts, None, None)
    assert _ids(area) == [("probe.failed", Level.WARNING)]
    f = area.findings[0]
    assert f.title == f"could not determine nvcc's host compiler: {fake_root / 'bin/gcc'} timed out after 0.5 s"
    assert "run `/bin/gcc --version` yourself" in f.fix  # the path as the host names it (fake root: /bin/gcc)
    script(gcc, "", rc=4)
    area = cuda_stack_area(detect_cuda_toolkit(Host.for_test(fake_root, {"CUDA_HOME": "/tk"})), None, None)
    assert area.findings[0].title.endswith("`/bin/gcc --version` exited with status 4")
    # without a toolkit the host compiler is nobody's business
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {}), timeout=0.5)
    assert facts.host_compiler.problem and cuda_stack_area(facts, None, None).findings == []


def test_an_nvcc_that_gives_no_version_is_said_so_in_the_summary(fake_root):
    """A hung or broken nvcc on PATH, no CUDA_HOME: the summary read "CUDA_HOME /<nvcc's
    grandparent>", as if a toolkit were there; with a CUDA build it read "no CUDA toolkit"."""
    for body, rc in (("exec /bin/sleep 30", 0), ("echo 'nvcc: error while loading shared libraries' >&2", 127)):
        nvcc = fake_root / "opt/cu/bin/nvcc"
        nvcc.parent.mkdir(parents=True, exist_ok=True)
        nvcc.write_text(f"#!/bin/sh\n{body}\nexit {rc}\n")
        nvcc.chmod(0o755)
        facts = detect_cuda_toolkit(Host.for_test(fake_root, {"PATH": str(nvcc.parent)}), timeout=0.5)
        assert cuda_stack_area(facts, None, None).summary == "nvcc at /opt/cu gave no version"
        assert cuda_stack_area(facts, "12.8", None).summary == "nvcc at /opt/cu gave no version; builds: Python torch CUDA 12.8"
