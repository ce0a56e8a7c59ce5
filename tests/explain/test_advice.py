"""Advice made concrete with this machine's facts: the -D value, the dirs, the variant to fetch.

The libtorch trees are real directories under a test root, seen through Host.for_test; the command
layer's gatherer (doctor/explain_machine.py) turns them into plain facts and looks up the files the
advice names through the same door as on a user's machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dataclasses

from doctor import fixes
from doctor.explain import MachineFacts, explain_text
from doctor.explain_machine import explain_on, machine_facts
from doctor.host import Host
from doctor.probe.libtorch import LibtorchInstall

ROOT = "/opt/libtorch"


def make_install(tmp_path: Path, *, version="2.13.0", variant="cpu", abi="cxx11", cxx_standard=20,
                 libs=("c10", "torch", "torch_cpu"), headers=("torch/extension.h",),
                 api_headers=("torch/torch.h", "torch/types.h"), machine="x86_64", env=None, glibc="2.36"):
    base = tmp_path / ROOT.lstrip("/")
    for h in headers:
        (base / "include" / h).parent.mkdir(parents=True, exist_ok=True)
        (base / "include" / h).write_text("")
    for h in api_headers:
        path = base / "include/torch/csrc/api/include" / h
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (base / "lib").mkdir(parents=True, exist_ok=True)
    for lib in libs:
        (base / "lib" / f"lib{lib}.so").write_bytes(b"")
    install = LibtorchInstall(
        root=ROOT, origins=["LIBTORCH"], include_dirs=[f"{ROOT}/include", f"{ROOT}/include/torch/csrc/api/include"],
        lib_dir=f"{ROOT}/lib", exists=True, complete=True, version=version, variant=variant,
        cxx_standard=cxx_standard, cxx_standard_source="TorchConfig.cmake", abi=abi, abi_source="libc10 symbols",
        elf_machine=machine, libraries=[f"lib{l}.so" for l in libs],
    )
    host = Host.for_test(tmp_path, env=env or {}, glibc=glibc)
    return host, machine_facts(host, install)


def one(text: str, machine=None):
    """The one finding of `text`, explained with (host, facts) or with plain facts alone."""
    if isinstance(machine, tuple):
        host, facts = machine
    else:
        host, facts = Host.for_test(Path("/nonexistent-root")), machine
    (finding,) = explain_on(host, text, facts)
    return finding


OLD_ABI_LINK = "main.cpp:(.text+0x3e): undefined reference to `c10::Device::Device(std::string const&)'"
CXX11_LOAD = "OSError: ./ext.so: undefined symbol: _ZN3c105ErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"


def test_abi_fix_names_libtorchs_value_and_the_flag_on_the_command_line(tmp_path):
    facts = make_install(tmp_path)
    f = one("g++ -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 -D_GLIBCXX_USE_CXX11_ABI=0 main.cpp -lc10\n" + OLD_ABI_LINK, facts)
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in f.fix
    assert "Your command line has -D_GLIBCXX_USE_CXX11_ABI=0." in f.detail  # the last -D wins
    assert f"libtorch 2.13.0+cpu at {ROOT} uses the CXX11 std::string ABI (evidence: libc10 symbols)" in f.detail
    assert "fetch" not in f.fix  # 2.13 has only the CXX11 build


def test_abi_on_an_old_abi_libtorch_offers_the_other_build(tmp_path):
    f = one(CXX11_LOAD, make_install(tmp_path, version="2.5.1", abi="pre-cxx11"))
    assert "-D_GLIBCXX_USE_CXX11_ABI=0" in f.fix
    assert "or fetch the cxx11 build of libtorch 2.5.1" in f.fix


def test_abi_that_matches_the_active_libtorch_blames_another_libtorch(tmp_path):
    f = one(CXX11_LOAD, make_install(tmp_path))
    assert "linked against another libtorch" in f.title
    assert f"LD_LIBRARY_PATH=\"{ROOT}/lib" in f.fix


def test_abi_without_facts_reasons_from_the_symbol_alone():
    f = one(OLD_ABI_LINK)
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in f.fix and "old (pre-CXX11)" in f.title


def test_headers_says_which_include_dir_holds_the_header(tmp_path):
    f = one("x.cpp:1:10: fatal error: torch/types.h: No such file or directory", make_install(tmp_path))
    assert f"torch/types.h is in {ROOT}/include/torch/csrc/api/include (the second include dir" in f.detail
    assert f'export CPLUS_INCLUDE_PATH="{ROOT}/include:{ROOT}/include/torch/csrc/api/include' in f.fix
    assert f"--extra-include-dirs={ROOT}/include --extra-include-dirs={ROOT}/include/torch/csrc/api/include" in f.fix


def test_headers_that_libtorch_does_not_have(tmp_path):
    f = one("a.cpp:3:27: fatal error: torch/Tensor.h: No such file or directory", make_install(tmp_path))
    assert "torch/Tensor.h is not in the active libtorch" in f.detail


def test_headers_without_libtorch_say_fetch():
    f = one("fatal error: 'torch/torch.h' file not found", MachineFacts())
    assert f.fix.startswith('eval "$(doctor fetch-libtorch --emit setenv)"')


def test_link_names_the_lib_dir_and_flags_cuda_libs_a_cpu_build_lacks(tmp_path):
    f = one("/usr/bin/ld: cannot find -ltorch\n/usr/bin/ld: cannot find -ltorch_cuda", make_install(tmp_path))
    assert f"libtorch.so is in {ROOT}/lib" in f.detail
    assert "libtorch_cuda.so is not part of the active libtorch 2.13.0+cpu" in f.detail
    assert "a CPU build has no CUDA libraries" in f.detail
    assert f'export LIBRARY_PATH="{ROOT}/lib' in f.fix and f"--extra-lib-dirs={ROOT}/lib" in f.fix


def test_link_never_gives_the_lib_dir_of_a_tree_that_lacks_the_library(tmp_path):
    """-ltorch_cuda alone against the CPU build: its LIBRARY_PATH cannot help (as for the loader);
    the fix fetches a CUDA build."""
    cuda = one("/usr/bin/ld: cannot find -ltorch_cuda", make_install(tmp_path))
    assert "LIBRARY_PATH" not in cuda.fix, cuda.fix
    assert cuda.fix.startswith('for -ltorch_cuda: drop them, or fetch a CUDA build of libtorch 2.13.0: eval "$(doctor '
                               'fetch-libtorch --version 2.13.0 --variant cu'), cuda.fix


def test_cabal_library_list_is_split(tmp_path):
    f = one("* Missing (or bad) C libraries: c10, torch", make_install(tmp_path))
    assert "-lc10, -ltorch" in f.title


def test_loader_fix_for_a_log_of_this_platform_uses_this_machines_libtorch(tmp_path):
    line = "./app: error while loading shared libraries: libc10.so: cannot open shared object file: No such file or directory"
    f = one(line, make_install(tmp_path))
    assert "LD_LIBRARY_PATH=" in f.fix and f"{ROOT}/lib" in f.fix


@pytest.mark.parametrize("line,wanted", [
    ("dyld[9]: Library not loaded: @rpath/libc10.dylib", ("install_name_tool -add_rpath", "DYLD_LIBRARY_PATH", "SIP")),
    ("The code execution cannot proceed because c10.dll was not found.",
     ("$env:PATH = '<libtorch>\\lib;' + $env:PATH", 'set "PATH=<libtorch>\\lib;%PATH%"')),
])
def test_loader_fix_for_a_log_of_another_platform_speaks_that_platform(tmp_path, line, wanted):
    """Issue 14: a macOS or Windows log read on Linux gets that platform's fix, never this machine's paths."""
    f = one(line, make_install(tmp_path))
    assert all(w in f.fix for w in wanted) and f"{ROOT}/lib" not in f.fix


def loader_line(lib: str) -> str:
    return f"./app: error while loading shared libraries: {lib}: cannot open shared object file: No such file or directory"


def test_loader_for_a_cuda_library_a_cpu_libtorch_lacks_fetches_a_cuda_build(tmp_path):
    """The active tree cannot provide libc10_cuda.so: its loader path would not help, a CUDA build would
    (by its variant's name: --variant auto fetches the CPU build again on a machine without a driver)."""
    f = one(loader_line("libc10_cuda.so"), make_install(tmp_path))
    assert f"libc10_cuda.so is not in the active libtorch 2.13.0+cpu at {ROOT} (a CPU build)" in f.detail
    assert f.fix.startswith('fetch a CUDA build of libtorch 2.13.0: eval "$(doctor fetch-libtorch --version 2.13.0 --variant cu')
    assert "--variant auto" not in f.fix and "LD_LIBRARY_PATH" not in f.fix and f"{ROOT}/lib" not in f.fix
    both = one(loader_line("libc10.so") + "\n" + loader_line("libc10_cuda.so"), make_install(tmp_path))
    assert "LD_LIBRARY_PATH" not in both.fix and "--variant cu" in both.fix  # the tree lacks one of them


def test_loader_for_a_cuda_library_without_facts_fetches_a_cuda_build():
    f = one(loader_line("libtorch_cuda.so"), MachineFacts())
    assert f.fix.startswith("fetch a CUDA build of libtorch ") and "--variant cu" in f.fix


@pytest.mark.parametrize("facts", ["cpu-tree", "none"])
def test_loader_for_torchvision_says_it_is_not_part_of_libtorch(tmp_path, facts):
    machine = make_install(tmp_path) if facts == "cpu-tree" else MachineFacts()
    f = one(loader_line("libtorchvision.so"), machine)
    assert "libtorchvision.so is not part of libtorch: it is torchvision's C++ library, built and installed separately" \
        in f.detail
    assert f.fix.startswith("build and install torchvision")
    assert "fetch-libtorch" not in f.fix and "LD_LIBRARY_PATH=" not in f.fix and f"{ROOT}/lib" not in f.fix
    if facts == "cpu-tree":
        assert "torchvision 0.28.x (the release made for this torch)" in f.fix  # torch 2.13 ↔ torchvision 0.28


def test_loader_for_torchvision_copied_into_the_active_libtorch_uses_its_lib_dir(tmp_path):
    f = one(loader_line("libtorchvision.so"), make_install(tmp_path, libs=("c10", "torch", "torchvision")))
    assert f"libtorchvision.so is in {ROOT}/lib" in f.detail and f'LD_LIBRARY_PATH="{ROOT}/lib' in f.fix


def test_loader_for_the_driver_library_is_about_the_driver(tmp_path):
    f = one("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", make_install(tmp_path))
    assert "NVIDIA driver" in f.detail and "/run/opengl-driver/lib" in f.fix and "--gpus all" in f.fix


def test_glibc_compares_with_this_systems_glibc(tmp_path):
    f = one("/lib64/libc.so.6: version `GLIBC_2.28' not found (required by /opt/libtorch/lib/libtorch_cpu.so)",
            make_install(tmp_path, glibc="2.17"))
    assert "It needs GLIBC_2.28; this system has glibc 2.17." in f.detail
    assert "glibc ≥ 2.28" in f.fix


def test_glibcxx_from_a_conda_env_points_at_conda():
    f = one("ImportError: /home/u/miniconda3/envs/x/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found "
            "(required by /home/u/miniconda3/envs/x/lib/python3.12/site-packages/torch/lib/libtorch_python.so)")
    assert "conda install -c conda-forge" in f.fix


def test_arch_on_apple_silicon_points_at_the_arm64_zip():
    f = one("ld: warning: ignoring file '/u/libtorch/lib/libc10.dylib': found architecture 'x86_64', required architecture 'arm64'")
    assert f.title == "libtorch is built for x86_64, not arm64"
    assert "libtorch-macos-arm64" in f.fix


def test_arch_on_aarch64_linux_points_at_the_wheel(tmp_path):
    host, facts = make_install(tmp_path, machine="x86_64")
    facts = (host, dataclasses.replace(facts, machine="aarch64"))
    f = one("/usr/bin/ld: skipping incompatible /opt/libtorch/lib/libtorch_cpu.so when searching for -ltorch_cpu", facts)
    assert "no aarch64 Linux libtorch zip" in f.fix
    assert "is an x86_64 build; this machine is aarch64" in f.detail


def test_driver_too_old_names_the_floor_and_the_variant_it_can_run(tmp_path):
    f = one("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
            make_install(tmp_path, variant="cu126"))
    assert "CUDA 11.4" in f.title
    assert "driver ≥ 525.60.13" in f.detail
    assert "torch 2.13.0 has no build for CUDA 11.x" in f.fix
    g = one("RuntimeError: The NVIDIA driver on your system is too old (found version 12040).",
            make_install(tmp_path / "b", variant="cu130"))
    assert "--version 2.13.0 --variant cu126" in g.fix and "≥ 580" in g.fix


@pytest.mark.parametrize("sm,variant", [("sm_120", "cu130"), ("sm_61", "cu126")])
def test_arch_unsupported_names_a_variant_with_kernels_for_the_gpu(tmp_path, sm, variant):
    line = f"NVIDIA Some GPU with CUDA capability {sm} is not compatible with the current PyTorch installation."
    f = one(line, make_install(tmp_path, variant="cu126" if sm == "sm_120" else "cu130"))
    assert f"--version 2.13.0 --variant {variant}" in f.fix


def test_not_compiled_on_a_cpu_build_says_fetch_cuda(tmp_path):
    f = one("AssertionError: Torch not compiled with CUDA enabled", make_install(tmp_path))
    assert "indeed a CPU build" in f.detail and f.fix.startswith('fetch a CUDA variant: eval "$(doctor fetch-libtorch --version 2.13.0 --variant auto --emit setenv)"')
    # the variants named are the catalog's, not a hard-coded one
    from doctor.catalog.recommend import published_variants

    cuda = [v for v in published_variants("2.13.0") if v.startswith("cu")]
    assert cuda and f"published for 2.13.0: {', '.join(sorted(cuda, key=lambda v: int(v[2:])))}" in f.fix


def test_no_cuda_backend_on_a_cuda_build_is_the_dropped_libtorch_cuda(tmp_path):
    """Issue 17: the machine's facts choose link.as-needed over cuda.not-compiled, and say so."""
    facts = make_install(tmp_path, variant="cu126", libs=("c10", "torch", "torch_cpu", "torch_cuda"))
    f = one("RuntimeError: Could not run 'aten::add.out' with arguments from the 'CUDA' backend.", facts)
    assert f.id == "link.as-needed" and "--no-as-needed" in f.fix
    assert "chosen by: the active libtorch is a CUDA build (2.13.0+cu126)" in f.detail


def test_no_device_reports_cuda_visible_devices(tmp_path):
    f = one("RuntimeError: No CUDA GPUs are available", make_install(tmp_path, env={"CUDA_VISIBLE_DEVICES": ""}))
    assert "CUDA_VISIBLE_DEVICES is set here to ''" in f.detail and "hides every GPU" in f.detail


def test_nvml_insufficient_permissions_is_about_the_device_nodes_not_the_driver(tmp_path):
    """nvidia-smi's words in a rootless podman container (NVIDIA/nvidia-container-toolkit#210)."""
    f = one("Failed to initialize NVML: Insufficient Permissions", make_install(tmp_path))
    assert f.id == "cuda.no-device" and "it may not open /dev/nvidia*" in f.detail
    assert f.fix == fixes.gpu_device_access() and "install/load the NVIDIA driver" not in f.fix


def test_cxx_std_takes_the_higher_of_the_log_and_libtorch(tmp_path):
    f = one("all.h:4:2: error: #error C++17 or later compatible compiler is required to use PyTorch.", make_install(tmp_path))
    assert "-std=c++20" in f.fix


def test_oom_converts_bytes():
    f = one("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 4000000000000000 bytes.")
    assert f.title == "out of host memory (tried to allocate 3638.0 TiB)"


def test_tch_version_fetches_the_expected_version_and_variant(tmp_path):
    f = one("Error: this tch version expects PyTorch 2.5.0, got 2.13.0", make_install(tmp_path))
    assert "doctor fetch-libtorch --version 2.5.0 --variant cpu" in f.fix


def test_torchvision_pairing(tmp_path):
    f = one("RuntimeError: operator torchvision::nms does not exist", make_install(tmp_path))
    assert "torchvision 0.28.x" in f.fix


def test_cmake_names_the_prefix(tmp_path):
    f = one('  Could not find a package configuration file provided by "Torch" with any of', make_install(tmp_path))
    assert f"-DCMAKE_PREFIX_PATH={ROOT}" in f.fix


def test_every_finding_carries_the_active_libtorch_as_evidence(tmp_path):
    f = one(OLD_ABI_LINK, make_install(tmp_path))
    assert any(e.kind == "derived" and ROOT in e.excerpt for e in f.evidence)


def test_glibc_advice_names_the_series_the_catalog_says_runs_here(tmp_path):
    from doctor.catalog.releases import glibc_needed, newest_series_for_glibc

    text = ("./app: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.28' not found "
            "(required by /opt/libtorch/lib/libtorch_cpu.so)")
    f = one(text, make_install(tmp_path, glibc="2.27"))
    assert f"libtorch 2.13 needs glibc {glibc_needed('2.13.0')}" in f.fix
    assert f"use libtorch {newest_series_for_glibc('2.27')} or older, which runs on this glibc 2.27" in f.fix
    # without facts: no claim about this machine's glibc
    bare = one(text)
    assert "this glibc" not in bare.fix and "this system has glibc" not in bare.detail


def test_pip_no_wheel_reads_the_list_as_versions_not_as_text():
    """torch==2.0 is 2.0.0 to pip: a local tag, not a missing release, is why PyPI had none."""
    [f] = explain_text("ERROR: Could not find a version that satisfies the requirement torch==2.0+cu118 "
                       "(from versions: 1.13.1, 2.0.0, 2.0.1)")
    assert f.id == "python.torch-no-wheel"
    assert "local tag" in f.detail and "not a release" not in f.detail
    [g] = explain_text("ERROR: Could not find a version that satisfies the requirement torch==2.0.5 "
                       "(from versions: 1.13.1, 2.0.0, 2.1.0)")
    assert "torch 2.0.5 is not a release" in g.detail


def test_pip_no_wheel_shows_a_hostile_version_list_clipped():
    [f] = explain_text("ERROR: Could not find a version that satisfies the requirement torch==1.0 (from versions: 1."
                       + "9" * 3900 + ", 2.0.0)")
    assert f.id == "python.torch-no-wheel"
    shown = next(line for line in f.detail.splitlines() if line.startswith("For this interpreter"))
    assert len(shown) < 150 and "…" in shown
