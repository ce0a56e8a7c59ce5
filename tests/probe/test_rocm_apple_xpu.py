"""AMD (KFD topology), Apple (Rosetta, MPS) and Intel (presence) on fake machines."""

from __future__ import annotations

from testsupport.gpu_fakes import check_gpu, findings

from doctor.diagnose.gpu import meets_gpu
from doctor.diagnose.gpu_states import amd_unusable_why, mps_blocker_texts
from doctor.model import Level
from doctor.probe.gpu import detect_gpus


def mi300x(machine, nodes: int = 8, kfd: bool = True):
    machine.kfd_node(0, 0)  # the CPU node
    for n in range(1, nodes + 1):
        machine.kfd_node(n, 90402, device_id=0x74A1)
        machine.pci(f"0000:{n:02x}:00.0", "0x1002", "0x74a1", "0x120000", driver="amdgpu")
    if kfd:
        machine.file("/dev/kfd")
        machine.file("/dev/dri/renderD128")
    machine.file("/opt/rocm/.info/version", "6.4.0-47\n")


def test_mi300x_nodes_skip_the_cpu_node_and_decode_gfx942(machine):
    mi300x(machine)
    amd = detect_gpus(machine.host()).amd
    assert [g.node for g in amd.gpus] == list(range(1, 9))
    assert {g.gfx for g in amd.gpus} == {"gfx942"} and amd.gpus[0].device_id == 0x74A1
    assert amd.kfd and amd.kfd_writable and amd.usable and amd.rocm_version == "6.4.0"
    assert len(amd.pci_devices) == 8 and "class 0x120000" in amd.pci_devices[0]  # Instinct: processing accelerator


def test_mi300x_recommendation_and_area(machine):
    mi300x(machine)
    gpu, area = check_gpu(machine, trees={"/srv/rocm": ("2.13.0", "rocm7.2")})
    assert gpu.recommended.variant == "rocm7.2"
    assert "8 AMD GPUs (gfx942 ×8)" in area.summary
    assert [f for f in area.findings if f.level.rank >= Level.WARNING.rank] == []
    assert meets_gpu(gpu) == (True, "8 AMD GPU(s): gfx942 ×8")


def test_rocm_build_without_the_gpu_target_read_from_its_rocblas_files(machine):
    mi300x(machine, nodes=2)
    lib = machine.root / "srv/rocm/lib/rocblas/library"
    lib.mkdir(parents=True)
    for name in ("TensileLibrary_lazy_gfx90a.dat", "TensileLibrary_lazy_gfx1100.dat", "TensileManifest.txt"):
        (lib / name).write_text("")
    _, area = check_gpu(machine, trees={"/srv/rocm": ("2.8.0", "rocm6.4")})
    found = findings(area, "rocm.arch-unsupported")
    assert len(found) == 2 and all(f.level is Level.ERROR for f in found)
    assert "gfx90a gfx1100" in found[0].detail and "invalid device function" in found[0].detail
    assert "--variant rocm7.2" in found[0].fix  # a variant whose list has gfx942
    (lib / "TensileLibrary_lazy_gfx942.dat").write_text("")
    _, area = check_gpu(machine, trees={"/srv/rocm": ("2.8.0", "rocm6.4")})
    assert findings(area, "rocm.arch-unsupported") == []


def test_rocm_build_judged_from_the_catalog_when_the_tree_has_no_kernels(machine):
    machine.kfd_node(0, 0)
    machine.kfd_node(1, 120001)  # gfx1201 (RX 9070): only the ROCm 7 list has it
    machine.file("/dev/kfd")
    _, area = check_gpu(machine, trees={"/srv/rocm": ("2.5.0", "rocm6.2")})
    (f,) = findings(area, "rocm.arch-unsupported")
    assert "gfx1201" in f.title and "rocm7" in f.fix


def test_amd_gpu_without_dev_kfd(machine):
    mi300x(machine, nodes=1, kfd=False)
    gpu, area = check_gpu(machine, trees={"/srv/rocm": ("2.13.0", "rocm7.2")})
    assert not gpu.amd.usable and gpu.amd.unusable == "kfd-missing"
    assert "/dev/kfd is missing" in amd_unusable_why(gpu.amd)
    (f,) = findings(area, "rocm.no-device")
    assert f.level is Level.ERROR and "--device /dev/kfd" in f.fix
    assert gpu.recommended.variant == "cpu"


def test_rosetta_is_reported(machine):
    machine.command("sysctl", {"sysctl.proc_translated": ("1\n", 0), "hw.optional.arm64": ("1\n", 0)})
    machine.command("sw_vers", {"-productVersion": ("14.5\n", 0)})
    gpu, area = check_gpu(machine, system="Darwin", machine="x86_64")
    a = gpu.apple
    assert a.rosetta and a.apple_silicon and a.macos_version == "14.5" and not a.mps_eligible
    (f,) = findings(area, "apple.rosetta")
    assert f.level is Level.WARNING and "arm64" in f.fix
    assert gpu.recommended.variant == "cpu" and any("Rosetta" in r for r in gpu.recommended.reasons)
    assert "Apple silicon under Rosetta" in area.summary


def test_native_apple_silicon_has_mps_on_recent_macos(machine):
    machine.command("sw_vers", {"-productVersion": ("15.1\n", 0)})
    gpu, area = check_gpu(machine, system="Darwin", machine="arm64")
    assert gpu.apple.mps_eligible and not gpu.apple.rosetta
    assert "MPS available" in area.summary and meets_gpu(gpu) == (True, "Apple silicon with MPS")
    assert not gpu.nvidia.present  # no NVIDIA probing on macOS


def test_old_macos_and_intel_macs_have_no_mps(machine):
    machine.command("sw_vers", {"-productVersion": ("13.6.1\n", 0)})
    gpu, _ = check_gpu(machine, system="Darwin", machine="arm64")
    assert not gpu.apple.mps_eligible and gpu.apple.mps_blockers == ["macos-too-old"]
    assert "older than 14.0" in mps_blocker_texts(gpu.apple)[0]
    # An Intel Mac: sysctl knows no proc_translated key and says hw.optional.arm64 is 0.
    machine.command("sysctl", {"hw.optional.arm64": ("0\n", 0)},
                    default=("sysctl: unknown oid 'sysctl.proc_translated'\n", 1))
    gpu, _ = check_gpu(machine, system="Darwin", machine="x86_64")
    assert gpu.apple.apple_silicon is False and not gpu.apple.rosetta
    assert gpu.apple.mps_blockers == ["not-apple-silicon", "macos-too-old"]  # sw_vers still says 13.6.1
    assert mps_blocker_texts(gpu.apple)[0] == "MPS needs Apple silicon"


def test_intel_gpu_is_reported_only(machine):
    machine.pci("0000:00:02.0", "0x8086", "0x56a0", "0x030000", driver="i915")
    gpu, area = check_gpu(machine)
    assert gpu.intel.present and "[8086:56a0]" in gpu.intel.devices[0]
    assert area.findings == [] and gpu.recommended.variant == "cpu"
    assert any("Intel GPU" in d for d in area.details)


def test_rocm_agent_enumerator_when_the_topology_is_unreadable(machine):
    machine.file("/dev/kfd")
    machine.command("rocm_agent_enumerator", default=("gfx000\ngfx90a\ngfx90a\n", 0))
    amd = detect_gpus(machine.host()).amd
    assert [g.gfx for g in amd.gpus] == ["gfx90a", "gfx90a"] and amd.usable
