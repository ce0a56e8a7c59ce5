"""NVIDIA detection on fake machines: files, fake nvidia-smi, and a real child process loading a
compiled fake libcuda.so.1 through ctypes."""

from __future__ import annotations

import resource
import shutil
import time

import pytest
from testsupport.gpu_fakes import (
    PROC_OLD,
    PROC_OPEN,
    SMI_5090,
    SMI_H200,
    SMI_K80_OLD,
    SMI_MIXED,
    SMI_NO_DRIVER,
    WSL_PROC_VERSION,
)

from doctor.errors import DoctorError
from doctor.host import Host
from doctor.check import gpu_report
from doctor.diagnose.gpu_states import nvidia_unreachable_why as why
from doctor.probe.gpu import detect_gpus

LIBDIR = "/usr/lib/x86_64-linux-gnu"


def install_lib(machine, lib, where=LIBDIR):
    target = machine.root / where.lstrip("/") / "libcuda.so.1"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lib, target)


def test_no_gpu_spawns_nothing_and_says_cpu(machine):
    # The driver child would run through this python and leave a mark: nothing may run here.
    marker = machine.root / "ran"
    machine.script("/bin/fake-python", f"{shutil.which('touch')} {marker}\n")
    gpu, _python, _libtorch, _area = gpu_report(machine.host(python=str(machine.root / "bin/fake-python")))
    assert not marker.exists()
    assert not gpu.nvidia.present and not gpu.amd.present and gpu.apple is None
    assert gpu.nvidia.smi_status == "not run" and gpu.nvidia.gpus == []
    assert gpu.recommended.variant == "cpu"
    assert "no usable GPU" in " ".join(gpu.recommended.reasons)


def test_no_gpu_here_runs_no_command():
    """This machine has no GPU: detection reads files and starts no process (nvidia-smi, rocminfo,
    the libcuda child), the part of a probe that costs; scripts/bench-check measures the rest."""
    host = Host.from_system()
    if detect_gpus(host).nvidia.present or detect_gpus(host).amd.present:
        pytest.skip("this machine has a GPU: the no-GPU fast path is not what runs here")
    faults = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    gpu = detect_gpus(Host.from_system())
    assert not gpu.usable
    # every process started (and waited for, as Host does) adds its page faults to this count
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt == faults


def test_one_h200_from_files_and_nvidia_smi(machine):
    machine.nvidia_driver("570.124.06", proc=PROC_OPEN)
    machine.nvidia_smi(SMI_H200)
    gpu = detect_gpus(machine.host())
    nv = gpu.nvidia
    assert nv.present and nv.reachable and nv.smi_status == "ok"
    assert nv.driver_version == "570.124.06" and nv.driver_version_source == "/sys/module/nvidia/version"
    assert nv.kernel_module == "open"
    (g,) = nv.gpus
    assert (g.name, g.compute_capability, g.memory_mib, g.visible) == ("NVIDIA H200", "9.0", 143771, True)
    # no libcuda here: the CUDA version is derived from the driver version, and says so
    assert nv.driver_cuda_version == "12.8" and "derived" in nv.driver_cuda_source


def test_nvidia_smi_fields_out_of_shape_are_unknown_not_a_crash(machine):
    """A memory of 400 digits (float() gives inf, int() raised OverflowError and the whole GPU
    area was lost) and a capability that is no number: the GPU is still listed, those two
    fields unknown."""
    machine.nvidia_driver("570.124.06", proc=PROC_OPEN)
    machine.nvidia_smi(f"0, NVIDIA H200, 570.124.06, {'9' * 400}, 9.0\n1, NVIDIA H200, 570.124.06, 143771, x.y\n")
    nv = detect_gpus(machine.host()).nvidia
    assert nv.smi_status == "ok" and not nv.problems
    assert [(g.index, g.memory_mib, g.compute_capability) for g in nv.gpus] == [(0, None, "9.0"), (1, 143771, None)]


def test_several_mixed_gpus_are_all_listed(machine):
    machine.nvidia_driver("560.35.03", gpus=3)
    machine.nvidia_smi(SMI_MIXED)
    nv = detect_gpus(machine.host()).nvidia
    assert [(g.index, g.compute_capability) for g in nv.gpus] == [(0, "8.9"), (1, "8.6"), (2, "6.1")]
    assert all(g.visible for g in nv.gpus)


def test_cuda_visible_devices_hides_gpus_and_warns_about_order(machine):
    machine.nvidia_driver("560.35.03", gpus=3)
    machine.nvidia_smi(SMI_MIXED)
    nv = detect_gpus(machine.host({"CUDA_VISIBLE_DEVICES": "1"})).nvidia
    assert [g.visible for g in nv.gpus] == [False, True, False]
    assert "hides GPU 0, 2" in nv.visible_note and "CUDA_DEVICE_ORDER" in nv.visible_note
    nv = detect_gpus(machine.host({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})).nvidia
    assert "CUDA_DEVICE_ORDER" not in nv.visible_note


def test_driver_470_rejects_compute_cap_and_the_query_falls_back(machine):
    machine.nvidia_driver("470.256.02", proc=PROC_OLD.replace("375.74", "470.256.02"), gpus=2)
    machine.nvidia_smi(SMI_K80_OLD, old_driver=True)
    nv = detect_gpus(machine.host()).nvidia
    assert nv.reachable and [g.name for g in nv.gpus] == ["Tesla K80", "Tesla K80"]
    assert all(g.compute_capability is None for g in nv.gpus)
    assert "cannot report compute_cap" in nv.smi_message
    assert any('Field "compute_cap" is not a valid field' in e.excerpt for e in nv.evidence)
    assert nv.problems == []


def test_driver_470_with_libcuda_fills_in_the_compute_capability(machine, libcuda):
    machine.nvidia_driver("470.256.02", gpus=2)
    machine.nvidia_smi(SMI_K80_OLD, old_driver=True)
    install_lib(machine, libcuda(version=11040, cc="3.7", name="Tesla K80", count=2))
    nv = detect_gpus(machine.host()).nvidia
    assert [g.compute_capability for g in nv.gpus] == ["3.7", "3.7"]
    assert nv.driver_cuda_version == "11.4" and nv.driver_cuda_source == "libcuda cuDriverGetVersion"
    assert nv.cuda_init == "CUDA_SUCCESS"


def test_nvidia_smi_cannot_reach_the_driver(machine):
    machine.file("/sys/module/nvidia/version", "550.144.03\n")
    machine.command("nvidia-smi", default=(SMI_NO_DRIVER, 9))
    nv = detect_gpus(machine.host()).nvidia
    assert nv.present and not nv.reachable and nv.smi_status == "no driver"
    assert nv.unreachable == "smi-no-driver"
    assert "couldn't communicate with the NVIDIA driver" in why(nv)


def test_nvidia_smi_hanging_is_reported_and_the_check_completes_in_about_the_timeout(machine):
    machine.nvidia_driver("570.124.06")
    machine.command("nvidia-smi", default=(SMI_H200, 0), sleep=30)
    start = time.monotonic()
    gpu = detect_gpus(machine.host({"DOCTOR_PROBE_TIMEOUT": "0.5"}))
    took = time.monotonic() - start
    assert took < 15, took  # killed at its 0.5 s, not waited out (30 s); slack for a loaded machine
    (problem,) = gpu.problems
    assert problem.probe == "nvidia-smi" and problem.error == "timed out after 0.5 s"
    assert gpu.nvidia.smi_status == "timed out" and not gpu.nvidia.reachable
    assert gpu.nvidia.driver_version == "570.124.06"  # the files still answered


def test_a_hanging_cuinit_still_yields_the_driver_cuda_version(machine, libcuda):
    machine.nvidia_driver("570.124.06")
    machine.nvidia_smi(SMI_H200)
    install_lib(machine, libcuda(version=12080, hang=True))
    start = time.monotonic()
    gpu = detect_gpus(machine.host({"DOCTOR_PROBE_TIMEOUT": "1"}))
    assert time.monotonic() - start < 30  # cuInit hangs for 60 s: the child was killed at its 1 s
    assert gpu.nvidia.driver_cuda_version == "12.8" and gpu.nvidia.driver_cuda_source == "libcuda cuDriverGetVersion"
    assert [(p.probe, p.error) for p in gpu.problems] == [("the libcuda child process", "timed out after 1 s")]
    assert gpu.nvidia.reachable  # nvidia-smi answered


def test_the_child_runs_without_cuda_visible_devices(machine, libcuda):
    """An empty CUDA_VISIBLE_DEVICES makes cuInit fail; the child must not inherit it. Here
    the fake libcuda reads nothing, so check the child's environment through a fake python."""
    machine.nvidia_driver("570.124.06")
    install_lib(machine, libcuda())
    machine.script("/bin/fake-python", f'{shutil.which("env")} > {machine.root}/bin/child-env\n')
    detect_gpus(machine.host({"CUDA_VISIBLE_DEVICES": "", "MARK": "1"}, python=str(machine.root / "bin/fake-python")))
    env = (machine.root / "bin/child-env").read_text()
    assert "MARK=1" in env and "CUDA_VISIBLE_DEVICES" not in env


def test_libcuda_alone_lists_the_gpus_when_nvidia_smi_is_absent(machine, libcuda):
    machine.nvidia_driver("575.64.03")
    install_lib(machine, libcuda(version=12090, cc="12.0", name="NVIDIA GeForce RTX 5090", mem_mib=32607))
    nv = detect_gpus(machine.host()).nvidia
    assert nv.reachable and nv.gpus[0].source == "libcuda"
    assert (nv.gpus[0].name, nv.gpus[0].compute_capability, nv.gpus[0].memory_mib) == ("NVIDIA GeForce RTX 5090", "12.0", 32607)
    assert nv.driver_cuda_version == "12.9"


def test_both_proc_formats_give_the_driver_when_the_module_file_is_missing(machine):
    machine.file("/proc/driver/nvidia/version", PROC_OLD)
    nv = detect_gpus(machine.host()).nvidia
    assert (nv.driver_version, nv.kernel_module, nv.driver_version_source) == ("375.74", "proprietary", "/proc/driver/nvidia/version")
    machine.file("/proc/driver/nvidia/version", PROC_OPEN)
    nv = detect_gpus(machine.host()).nvidia
    assert (nv.driver_version, nv.kernel_module) == ("550.144.03", "open")


def test_proc_gpu_information_names_gpus_but_does_not_make_them_reachable(machine):
    machine.file("/proc/driver/nvidia/version", PROC_OPEN)
    machine.file("/proc/driver/nvidia/gpus/0000:19:00.0/information",
                 "Model: \t\t NVIDIA H200\nIRQ:   \t\t 143\nBus Location: \t 0000:19:00.0\nDevice Minor: \t 0\n")
    nv = detect_gpus(machine.host()).nvidia
    assert [g.name for g in nv.gpus] == ["NVIDIA H200"] and nv.gpus[0].source == "/proc/driver/nvidia/gpus"
    assert not nv.reachable and nv.unreachable == "no-tools" and why(nv)


def test_wsl_uses_the_windows_driver_from_usr_lib_wsl(machine):
    machine.file("/dev/dxg")
    machine.file("/proc/version", WSL_PROC_VERSION)
    machine.nvidia_smi("0, NVIDIA GeForce RTX 4070, 566.36, 12282, 8.9\n", where="/usr/lib/wsl/lib")
    machine.file("/usr/lib/wsl/lib/libcuda.so.1")  # not loadable here: the child reports, the probe goes on
    nv = detect_gpus(machine.host()).nvidia
    assert nv.wsl and nv.driver_platform == "windows"
    assert nv.reachable and nv.driver_version == "566.36" and nv.driver_version_source == "nvidia-smi"
    assert nv.nvidia_smi.endswith("/usr/lib/wsl/lib/nvidia-smi")
    assert "/usr/lib/wsl/lib/libcuda.so.1" in nv.libraries
    assert any("libcuda.so.1" in e.excerpt for e in nv.evidence if e.kind == "command")  # the dlopen error


def test_container_with_driver_library_but_no_device_nodes(machine, libcuda):
    install_lib(machine, libcuda(init_rc=100))
    nv = detect_gpus(machine.host()).nvidia
    assert nv.present and not nv.reachable
    assert nv.cuda_init == "CUDA_ERROR_NO_DEVICE (100)"
    assert nv.unreachable == "cuinit-failed"
    assert "cuInit failed: CUDA_ERROR_NO_DEVICE (100)" in why(nv)


def test_container_with_library_file_but_no_device_nodes_without_running_it(machine):
    machine.file(LIBDIR + "/libcuda.so.1")  # an empty file: the child cannot load it
    nv = detect_gpus(machine.host()).nvidia
    assert nv.present and not nv.reachable
    assert nv.unreachable == "no-device-node"
    assert "no /dev/nvidia* device node" in why(nv) and "--gpus all" in why(nv)


def test_device_nodes_but_no_driver_libraries(machine):
    machine.file("/dev/nvidia0")
    machine.file("/dev/nvidiactl")
    nv = detect_gpus(machine.host()).nvidia
    assert nv.present and not nv.reachable
    assert nv.unreachable == "no-driver-libraries" and "no libcuda.so.1" in why(nv)


def test_gpu_on_the_pci_bus_without_the_nvidia_driver(machine):
    machine.pci("0000:01:00.0", "0x10de", "0x2684", "0x030000", driver="nouveau")
    gpu, _python, _libtorch, _area = gpu_report(machine.host())
    assert gpu.nvidia.present and not gpu.nvidia.reachable
    assert gpu.nvidia.unreachable == "driver-not-loaded" and gpu.nvidia.pci_bound_drivers == ["nouveau"]
    assert "NVIDIA driver is not loaded (bound to nouveau)" in why(gpu.nvidia)
    assert gpu.recommended.variant == "cpu"
    assert any("cannot be used" in r for r in gpu.recommended.reasons)


def test_nixos_driver_path_is_searched(machine, libcuda):
    machine.nvidia_driver("570.124.06")
    machine.file("/etc/NIXOS")
    install_lib(machine, libcuda(), where="/run/opengl-driver/lib")
    nv = detect_gpus(machine.host()).nvidia
    assert nv.nixos and nv.libraries == ["/run/opengl-driver/lib/libcuda.so.1"]
    assert nv.reachable and nv.driver_cuda_version == "12.8"


def test_stub_libcuda_is_named(machine, libcuda):
    machine.nvidia_driver("570.124.06")
    install_lib(machine, libcuda(init_rc=34))
    nv = detect_gpus(machine.host()).nvidia
    assert nv.unreachable == "cuinit-failed" and "link stub" in why(nv)


def test_driver_override_env(machine):
    gpu = detect_gpus(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "550.54.14"}))
    assert gpu.nvidia.driver_version == "550.54.14" and gpu.nvidia.driver_version_source == "env DOCTOR_CUDA_DRIVER_VERSION"
    assert not gpu.nvidia.present
    gpu = detect_gpus(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "12.4"}))
    assert gpu.nvidia.driver_cuda_version == "12.4" and gpu.nvidia.driver_version is None
    with pytest.raises(DoctorError, match="DOCTOR_CUDA_DRIVER_VERSION"):
        detect_gpus(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "latest"}))


def test_bad_probe_timeout_is_a_clear_error(machine):
    with pytest.raises(DoctorError, match="DOCTOR_PROBE_TIMEOUT"):
        detect_gpus(machine.host({"DOCTOR_PROBE_TIMEOUT": "soon"}))


def test_rtx_5090_is_detected_with_its_capability(machine):
    machine.nvidia_driver("575.64.03")
    machine.nvidia_smi(SMI_5090)
    (g,) = detect_gpus(machine.host()).nvidia.gpus
    assert g.compute_capability == "12.0"
