"""Words for the GPU probes' raw states: why a GPU that exists cannot be used, and the fix.

The probes record states (doctor/probe/nvidia.py UNREACHABLE_STATES, rocm.py UNUSABLE_STATES,
apple.py MPS_BLOCKERS); this module alone turns them into sentences, so `check`, `--require`
and the recommendation's readers say the same thing. Pure functions of facts.
"""

from __future__ import annotations

from typing import Any

from doctor import fixes
from doctor.catalog.cuda import MPS_MIN_MACOS

NIXOS_LIB = "/run/opengl-driver/lib"

_CUINIT_HINTS = {
    "CUDA_ERROR_NO_DEVICE (100)": "no GPU reachable from here",
    "CUDA_ERROR_STUB_LIBRARY (34)": "the libcuda found is the toolkit's link stub, not the driver's",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)": "the kernel module and libcuda are from different driver versions",
}


def nvidia_unreachable_why(nv: Any) -> str:
    """Why NVIDIA GPUs that show themselves cannot be used ("" when the state is unknown)."""
    state = nv.unreachable
    if state in ("smi-no-driver", "smi-mismatch"):
        return f"nvidia-smi: {nv.smi_message}"
    if state == "smi-no-devices":
        return "the driver is loaded but reports no GPU (nvidia-smi: No devices were found)"
    if state == "no-permission":
        nodes = ", ".join(nv.denied_nodes) or "/dev/nvidia*"
        said = f" (nvidia-smi: {nv.smi_message})" if nv.smi_status == "no permission" else ""
        return (f"this user may not open the GPU's device nodes {nodes}{said}: they belong to a group it is not in, or "
                "a container's SELinux policy or rootless runtime keeps them closed; CUDA then reports no device")
    if state == "cuinit-failed":
        hint = _CUINIT_HINTS.get(nv.cuda_init or "", "")
        return f"cuInit failed: {nv.cuda_init}" + (f" — {hint}" if hint else "")
    if state == "no-device-node":
        return (f"the driver library {nv.libraries[0] if nv.libraries else 'libcuda.so.1'} is here but no /dev/nvidia* "
                "device node: the GPU is not passed into this container (docker run --gpus all), or the driver is not loaded")
    if state == "no-driver-libraries":
        return ("/dev/nvidia* device nodes exist but no libcuda.so.1: the driver's user-space libraries are not "
                "mounted (NVIDIA Container Toolkit) or not installed" + (f"; NixOS keeps them in {NIXOS_LIB}" if nv.nixos else ""))
    if state == "driver-not-loaded":
        where = nv.pci_addresses[0] if nv.pci_addresses else "?"
        bound = f" (bound to {', '.join(sorted(nv.pci_bound_drivers))})" if nv.pci_bound_drivers else ""
        return f"an NVIDIA GPU is on the PCI bus ({where}) but the NVIDIA driver is not loaded{bound}"
    if state == "no-tools":
        return "the NVIDIA kernel module is loaded but neither nvidia-smi nor libcuda.so.1 is installed"
    if state == "no-gpu-reported":
        return "the driver did not report any GPU"
    return ""


def nvidia_unreachable_fix(nv: Any) -> str:
    if nv.unreachable == "smi-mismatch":
        return "reboot (or reload the nvidia kernel module) so the loaded driver matches the installed libraries"
    if nv.unreachable == "no-permission":
        return fixes.gpu_device_access()
    if nv.unreachable == "no-device-node":
        return "in Docker: docker run --gpus all … (NVIDIA Container Toolkit); on the host: load the driver (nvidia-smi should list the GPU)"
    if nv.unreachable == "no-driver-libraries":
        return "mount the driver libraries (NVIDIA Container Toolkit: --gpus all), or install the driver's user-space package"
    return "install or load the NVIDIA driver until `nvidia-smi` lists the GPU; in containers: --gpus all; check CUDA_VISIBLE_DEVICES"


def amd_unusable_why(amd: Any) -> str:
    return {
        "kfd-missing": "the KFD topology lists AMD GPUs but /dev/kfd is missing: pass it into the container "
                       "(--device /dev/kfd --device /dev/dri)",
        "no-kfd": "an AMD GPU is on the PCI bus but /dev/kfd is missing: the amdgpu driver is not loaded, or /dev/kfd "
                  "is not passed into the container",
        "kfd-not-writable": "/dev/kfd is not writable by this user: add the user to the 'render' (and 'video') group",
        "no-gfx-target": "no AMD GPU with a gfx target in the KFD topology",
    }.get(amd.unusable, "")


AMD_UNUSABLE_FIX = ("load amdgpu and pass /dev/kfd and /dev/dri into containers (--device /dev/kfd --device /dev/dri); "
                    "add the user to the render and video groups")


def mps_blocker_texts(apple: Any) -> list[str]:
    """Why MPS cannot be used on this Mac, one sentence per blocker."""
    words = {
        "not-apple-silicon": "MPS needs Apple silicon",
        "silicon-unknown": "could not tell whether this Mac has Apple silicon",
        "rosetta": "this Python runs under Rosetta (x86_64): MPS and the arm64 libtorch need a native arm64 process",
        "macos-too-old": f"macOS {apple.macos_version} is older than {MPS_MIN_MACOS}, which PyTorch's MPS backend needs",
    }
    return [words.get(b, b) for b in apple.mps_blockers]
