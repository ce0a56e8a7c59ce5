"""The GPU area on fake machines: each build judged against the GPUs and the driver."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from testsupport.gpu_fakes import PROC_OPEN, SMI_5090, SMI_H200, SMI_MIXED, SMI_NO_DRIVER, FakeMachine, check_gpu, findings
from testsupport.support import as_another_user, world_tmp_dir

from doctor.check import gpu_report
from doctor.diagnose.gpu import Platform, gpu_area, meets_cuda, meets_gpu
from doctor.host import Host
from doctor.model import Level, to_jsonable
from doctor.probe.libtorch import detect_libtorch


def h200(machine, driver="570.124.06"):
    machine.nvidia_driver(driver, proc=PROC_OPEN.replace("550.144.03", driver))
    machine.nvidia_smi(SMI_H200.replace("570.124.06", driver))


def test_no_gpu_here_the_area_says_so():
    host = Host.from_system()
    gpu, python, libtorch, _ = gpu_report(host)
    if gpu.nvidia.present or gpu.amd.present:
        pytest.skip("this machine has a GPU: the no-GPU fast path is not what runs here")
    area = gpu_area(gpu, libtorch, python, Platform(host.system, host.machine))
    assert area.summary.startswith("no GPU found") and area.summary.endswith("recommended: cpu")
    assert area.findings == []


def test_h200_with_cu118_is_fine(machine):
    h200(machine)
    gpu, area = check_gpu(machine, trees={"/opt/libtorch": ("2.7.0", "cu118")})
    assert [f for f in area.findings if f.level.rank >= Level.WARNING.rank] == []
    text = "\n".join(area.details)
    assert "CUDA 11.8 build" in text and "GPU 0 (NVIDIA H200, 9.0): runs via sm_90" in text
    assert "1 NVIDIA GPU (NVIDIA H200)" in area.summary and "driver 570.124.06 (CUDA 12.8)" in area.summary
    assert meets_cuda(gpu, detect_libtorch(machine.host({"LIBTORCH": "/opt/libtorch"}), None).active_install)[0]


def test_rtx_5090_with_cu126_is_arch_unsupported_naming_cu128_or_newer(machine):
    machine.nvidia_driver("575.64.03")
    machine.nvidia_smi(SMI_5090)
    gpu, area = check_gpu(machine, trees={"/opt/libtorch": ("2.6.0", "cu126")})
    (f,) = findings(area, "cuda.arch-unsupported")
    assert f.level is Level.ERROR and "compute capability 12.0" in f.title
    assert "no kernel image is available" in f.detail and "sm_120" in f.detail
    named = f.fix.split("--variant ")[1].split()[0]
    assert named.startswith("cu") and int(named[2:]) >= 128, f.fix
    assert "doctor fetch-libtorch --version" in f.fix
    ok, why = meets_cuda(gpu, detect_libtorch(machine.host({"LIBTORCH": "/opt/libtorch"}), None).active_install)
    assert not ok and "12.0" in why


def test_rtx_5090_in_the_same_release_names_a_variant_of_that_release(machine):
    machine.nvidia_driver("575.64.03")
    machine.nvidia_smi(SMI_5090)
    _, area = check_gpu(machine, trees={"/opt/libtorch": ("2.9.0", "cu126")})
    (f,) = findings(area, "cuda.arch-unsupported")
    assert "--version 2.9.0 --variant cu128" in f.fix  # cu130 needs driver 580; cu128 runs on 575


def test_cpu_build_on_a_gpu_machine_warns_with_the_fetch_fix(machine):
    h200(machine)
    _, area = check_gpu(machine, trees={"/opt/libtorch": ("2.13.0", "cpu")})
    (f,) = findings(area, "gpu.cpu-build")
    assert f.level is Level.WARNING
    # 570 is below cu130/cu132's floor (580): cu126 is the newest 2.13 variant it runs
    assert f.fix == "doctor fetch-libtorch --version 2.13.0 --variant cu126"


def test_python_cpu_torch_on_a_gpu_machine_gets_a_pip_fix(machine):
    h200(machine, "580.65.06")
    site = machine.root / "venv/lib/python3.11/site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch/version.py").write_text("__version__ = '2.13.0+cpu'\ndebug = False\ncuda = None\nhip = None\n")
    host = machine.host(sys_path=["/venv/lib/python3.11/site-packages"])
    gpu, python, _, area = gpu_report(host)
    assert python is not None and python.variant == "cpu"
    (f,) = findings(area, "gpu.cpu-build")
    assert "pip install --force-reinstall torch==2.13.0 --index-url https://download.pytorch.org/whl/cu13" in f.fix
    assert gpu.recommended.version == "2.13.0"  # the installed Python torch's


def test_driver_too_old_names_an_older_variant(machine):
    h200(machine, "570.124.06")
    _, area = check_gpu(machine, trees={"/opt/libtorch": ("2.9.0", "cu130")})
    (f,) = findings(area, "cuda.driver-too-old")
    assert f.level is Level.ERROR and "≥ 580" in f.detail and "570.124.06" in f.detail
    assert "upgrade the NVIDIA driver to ≥ 580" in f.fix and "--version 2.9.0 --variant cu128" in f.fix
    assert any(e.source == "/sys/module/nvidia/version" for e in f.evidence)


def test_ptx_jit_warning_between_floor_and_toolkit_driver(machine):
    h200(machine, "550.144.03")
    _, area = check_gpu(machine, trees={"/opt/libtorch": ("2.8.0", "cu126")})
    (f,) = findings(area, "cuda.ptx-jit")
    assert f.level is Level.WARNING and "560.28.03" in f.detail and "560.28.03" in f.fix
    assert findings(area, "cuda.driver-too-old") == []


def test_no_device_is_an_error_with_a_cuda_build_and_a_warning_without(machine):
    machine.file("/sys/module/nvidia/version", "550.144.03\n")
    machine.command("nvidia-smi", default=(SMI_NO_DRIVER, 9))
    _, area = check_gpu(machine, trees={"/srv/cuda": ("2.8.0", "cu126")})
    (f,) = findings(area, "cuda.no-device")
    assert f.level is Level.ERROR and "couldn't communicate" in f.detail
    _, area = check_gpu(machine, trees={"/srv/cpu": ("2.8.0", "cpu")})
    (f,) = findings(area, "cuda.no-device")
    assert f.level is Level.WARNING
    assert "unreachable" in area.summary


def test_cuda_visible_devices_hiding_every_gpu_is_no_device(machine):
    h200(machine)
    gpu, area = check_gpu(machine, env={"CUDA_VISIBLE_DEVICES": ""}, trees={"/opt/libtorch": ("2.8.0", "cu128")})
    (f,) = findings(area, "cuda.no-device")
    assert "CUDA_VISIBLE_DEVICES" in f.title and not meets_gpu(gpu)[0]


def test_hidden_gpu_is_not_judged(machine):
    machine.nvidia_driver("580.65.06", gpus=3)
    machine.nvidia_smi(SMI_MIXED.replace("560.35.03", "580.65.06"))
    _, area = check_gpu(machine, trees={"/opt/libtorch": ("2.9.0", "cu130")})
    (f,) = findings(area, "cuda.arch-unsupported")  # the GTX 1080 Ti (6.1) has no cu130 code
    assert "GTX 1080 Ti" in f.title and "cu126" in f.fix
    gpu, area = check_gpu(machine, env={"CUDA_VISIBLE_DEVICES": "0,1"}, trees={"/opt/libtorch": ("2.9.0", "cu130")})
    assert findings(area, "cuda.arch-unsupported") == []
    assert gpu.recommended.variant == "cu132"  # both visible GPUs (8.9, 8.6) are covered by the newest


def test_hanging_nvidia_smi_becomes_probe_failed(machine):
    machine.nvidia_driver("570.124.06")
    machine.file("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")  # a real driver has its libraries (unloadable here)
    machine.command("nvidia-smi", default=(SMI_H200, 0), sleep=30)
    start = time.monotonic()
    _, area = check_gpu(machine, env={"DOCTOR_PROBE_TIMEOUT": "0.5"}, trees={"/opt/libtorch": ("2.8.0", "cu128")})
    assert time.monotonic() - start < 15  # killed at its 0.5 s, not waited out (30 s)
    (f,) = findings(area, "probe.failed")
    assert f.level is Level.WARNING and f.title == "could not determine the NVIDIA GPUs: nvidia-smi timed out after 0.5 s"
    assert "DOCTOR_PROBE_TIMEOUT" in f.detail
    assert findings(area, "cuda.no-device") == []  # unknown is not absent
    assert [f.level for f in area.findings] == [Level.WARNING]


def _fake_libtorch_cuda(tmp_path, with_runtime: bool) -> tuple:
    gcc = shutil.which("gcc")
    assert gcc, "gcc builds the ELF fixtures"
    (tmp_path / "a.c").write_text("int cudart_fn(void) { return 1; }\n")
    (tmp_path / "b.c").write_text("int cudart_fn(void); int torch_cuda_fn(void) { return cudart_fn(); }\n")
    cudart = tmp_path / "libcudart.so.12"
    subprocess.run([gcc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", str(cudart), str(tmp_path / "a.c")], check=True)
    torch_cuda = tmp_path / "libtorch_cuda.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-Wl,-rpath,$ORIGIN", "-o", str(torch_cuda), str(tmp_path / "b.c"),
                    str(cudart)], check=True)
    return torch_cuda, cudart if with_runtime else None


def test_unresolved_cuda_libraries_of_a_second_libtorch(machine, tmp_path):
    h200(machine)
    torch_cuda, _ = _fake_libtorch_cuda(tmp_path, with_runtime=False)
    _, area = check_gpu(machine, trees={"/opt/active": ("2.8.0", "cpu"), "/opt/other": ("2.8.0", "cu128")})
    assert findings(area, "loader.library-not-found") == []  # empty placeholder file: nothing to read
    shutil.copy(torch_cuda, machine.root / "opt/other/lib/libtorch_cuda.so")
    gpu, area = check_gpu(machine, trees={"/opt/active": ("2.8.0", "cpu"), "/opt/other": ("2.8.0", "cu128")})
    # read once by the probe, as facts: the verdict below is made from them, not from the disk
    (other,) = [b for b in gpu.builds if b.lib_dir == "/opt/other/lib"]
    assert other.main == "libtorch_cuda.so" and [(r.name, r.path) for r in other.needed] == [("libcudart.so.12", None)]
    (f,) = findings(area, "loader.library-not-found")
    assert "libcudart.so.12" in f.title and f.level is Level.ERROR and "RUNPATH $ORIGIN" in f.evidence[0].excerpt
    shutil.copy(tmp_path / "libcudart.so.12", machine.root / "opt/other/lib/libcudart.so.12")  # found via $ORIGIN
    _, area = check_gpu(machine, trees={"/opt/active": ("2.8.0", "cpu"), "/opt/other": ("2.8.0", "cu128")})
    assert findings(area, "loader.library-not-found") == []


def test_json_carries_gpus_driver_cuda_and_the_reasoning(machine):
    h200(machine)
    gpu, _ = check_gpu(machine)
    data = json.loads(json.dumps(to_jsonable(gpu)))
    nv = data["nvidia"]
    assert nv["driver_version"] == "570.124.06" and nv["driver_cuda_version"] == "12.8"
    assert nv["gpus"][0]["name"] == "NVIDIA H200" and nv["gpus"][0]["compute_capability"] == "9.0"
    rec = data["recommended"]
    assert rec["variant"] == "cu126" and rec["version"] == "2.13.0" and rec["reasons"]
    assert {c["variant"]: c["ok"] for c in rec["considered"]} == {"cu132": False, "cu130": False, "cu126": True}
    assert any(e["source"] == "/sys/module/nvidia/version" for e in nv["evidence"])


def test_meets_gpu_and_cuda_without_a_gpu(machine):
    gpu, _ = check_gpu(machine)
    assert meets_gpu(gpu) == (False, "no GPU found")
    assert meets_cuda(gpu, None)[0] is False
    assert meets_gpu(None)[0] is False and meets_cuda(None, None)[0] is False
    h200(machine)
    gpu, _ = check_gpu(machine)
    assert meets_gpu(gpu) == (True, "1 NVIDIA GPU(s): NVIDIA H200")
    assert meets_cuda(gpu, None)[0]
    cpu = detect_libtorch(machine.host({"LIBTORCH": "/opt/cpu"}), None)
    check_gpu(machine, trees={"/opt/cpu": ("2.8.0", "cpu")})
    cpu = detect_libtorch(machine.host({"LIBTORCH": "/opt/cpu"}), None).active_install
    assert meets_cuda(gpu, cpu) == (False, "the build is cpu, not a CUDA build")


def test_nvidia_smi_without_permission_names_the_device_nodes_and_the_group(machine):
    """nvidia-smi's real words (NVIDIA/nvidia-container-toolkit#210, #33) and exit status 4."""
    machine.nvidia_driver("570.124.06")
    machine.command("nvidia-smi", default=("Failed to initialize NVML: Insufficient Permissions\n", 4))
    gpu, area = check_gpu(machine, trees={"/srv/cuda": ("2.8.0", "cu128")})
    assert (gpu.nvidia.smi_status, gpu.nvidia.unreachable) == ("no permission", "no-permission")
    (f,) = findings(area, "cuda.no-device")
    assert f.level.value == "error" and "this user may not open the GPU's device nodes /dev/nvidia*" in f.detail
    assert "(nvidia-smi: Failed to initialize NVML: Insufficient Permissions)" in f.detail
    assert f.fix.startswith("ls -l /dev/nvidia* shows the group") and "usermod -aG" in f.fix


def test_device_nodes_this_user_may_not_open_are_named_without_nvidia_smi():
    """A container with libcuda but no nvidia-smi, its /dev/nvidia* mode 0660 for another group:
    the probe runs as another user (as root every node opens)."""
    top = world_tmp_dir("nvidia-nodes-")
    try:
        fake = FakeMachine(top / "root")
        fake.nvidia_driver("570.124.06")
        fake.file("/usr/lib/x86_64-linux-gnu/libcuda.so.1")
        for node in ("/dev/nvidia0", "/dev/nvidiactl"):
            (fake.root / node.lstrip("/")).chmod(0o660)
        facts = as_another_user(lambda: check_gpu(fake)[0].nvidia)
    finally:
        shutil.rmtree(top)
    assert facts.denied_nodes == ["/dev/nvidia0", "/dev/nvidiactl"] and facts.unreachable == "no-permission"


def test_driver_library_version_mismatch_says_reboot(machine):
    machine.nvidia_driver("570.124.06")
    machine.command("nvidia-smi", default=("Failed to initialize NVML: Driver/library version mismatch\n", 18))
    gpu, area = check_gpu(machine, trees={"/srv/cuda": ("2.8.0", "cu128")})
    assert gpu.nvidia.smi_status == "driver/library mismatch"
    (f,) = findings(area, "cuda.no-device")
    assert "Driver/library version mismatch" in f.detail and f.fix.startswith("reboot")
