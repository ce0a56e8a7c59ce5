"""Fake machines for the GPU probes: a temporary root with /sys, /proc and /dev files, and
fake commands (scripts in root/bin) that print the REAL strings of shared/reference/gpu.md.
A fake libcuda.so.1 is compiled from C so the driver child runs for real through ctypes."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from doctor.host import Host

# Real outputs (shared/reference/gpu.md and captured machines).
PROC_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.144.03  Release Build  "
             "(dvs-builder@U16-I3-B03-4-3)  Mon Dec 30 17:44:18 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n")
PROC_OLD = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  375.74  Wed Jun 14 01:39:39 PDT 2017\nGCC version:  gcc version 5.4.0 20160609\n"
SMI_H200 = "0, NVIDIA H200, 570.124.06, 143771, 9.0\n"
SMI_MIXED = ("0, NVIDIA GeForce RTX 4090, 560.35.03, 24564, 8.9\n"
             "1, NVIDIA GeForce RTX 3090, 560.35.03, 24576, 8.6\n"
             "2, NVIDIA GeForce GTX 1080 Ti, 560.35.03, 11264, 6.1\n")
SMI_5090 = "0, NVIDIA GeForce RTX 5090, 575.64.03, 32607, 12.0\n"
SMI_BAD_FIELD = 'Field "compute_cap" is not a valid field to query.\n'
SMI_K80_OLD = "0, Tesla K80, 470.256.02, 11441\n1, Tesla K80, 470.256.02, 11441\n"
SMI_NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                 "Make sure that the latest NVIDIA driver is installed and running.\n")
WSL_PROC_VERSION = ("Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0, "
                    "GNU ld (GNU Binutils) 2.37) #1 SMP Tue Nov 5 00:21:55 UTC 2024\n")
QUERY = "--query-gpu=index,name,driver_version,memory.total,compute_cap"
QUERY_OLD = "--query-gpu=index,name,driver_version,memory.total"

FAKE_LIBCUDA = r"""
#include <string.h>
#include <unistd.h>
#include <stddef.h>
int cuDriverGetVersion(int *v) { *v = VERSION; return 0; }
int cuInit(unsigned flags) { if (HANG) sleep(60); return INIT_RC; }
int cuDeviceGetCount(int *n) { *n = COUNT; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetName(char *name, int len, int d) { strncpy(name, NAME, len); return 0; }
int cuDeviceGetAttribute(int *v, int attr, int d) { *v = attr == 75 ? CC_MAJOR : CC_MINOR; return 0; }
int cuDeviceTotalMem_v2(size_t *bytes, int d) { *bytes = (size_t)MEM_MIB << 20; return 0; }
"""


class FakeMachine:
    def __init__(self, root: Path):
        self.root = root
        (root / "bin").mkdir(parents=True, exist_ok=True)

    def file(self, path: str, text: str = "") -> Path:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def script(self, path: str, body: str) -> Path:
        target = self.file(path, "#!/bin/sh\n" + body)
        target.chmod(0o755)
        return target

    def command(self, name: str, cases: dict[str, tuple[str, int]] | None = None, default: tuple[str, int] = ("", 0),
                sleep: float = 0, where: str = "/bin") -> Path:
        """A fake command: `cases` maps one argument it was given to (output, exit status)."""
        lines = []
        if sleep:
            # PATH holds only the fake commands: name the real sleep by its path.
            lines.append(f"{shutil.which('sleep')} {sleep}")
        for arg, (out, rc) in (cases or {}).items():
            lines.append(f'for a in "$@"; do [ "$a" = {shlex.quote(arg)} ] && {{ printf %s {shlex.quote(out)}; exit {rc}; }}; done')
        out, rc = default
        lines.append(f"printf %s {shlex.quote(out)}; exit {rc}")
        return self.script(f"{where}/{name}", "\n".join(lines) + "\n")

    def nvidia_smi(self, csv: str, where: str = "/bin", old_driver: bool = False) -> Path:
        if old_driver:
            return self.command("nvidia-smi", {QUERY: (SMI_BAD_FIELD, 2), QUERY_OLD: (csv, 0)}, where=where)
        return self.command("nvidia-smi", {QUERY: (csv, 0)}, default=("", 1), where=where)

    def nvidia_driver(self, version: str = "570.124.06", proc: str | None = None, gpus: int = 1) -> None:
        """A loaded NVIDIA driver as the files show it: module version, /proc, device nodes, libcuda."""
        self.file("/sys/module/nvidia/version", version + "\n")
        if proc is not None:
            self.file("/proc/driver/nvidia/version", proc)
        for i in range(gpus):
            self.file(f"/dev/nvidia{i}")
        self.file("/dev/nvidiactl")

    def pci(self, address: str, vendor: str, device: str, pci_class: str, driver: str | None = None) -> None:
        base = f"/sys/bus/pci/devices/{address}"
        self.file(f"{base}/vendor", vendor + "\n")
        self.file(f"{base}/device", device + "\n")
        self.file(f"{base}/class", pci_class + "\n")
        # The kernel's uevent, as `cat /sys/bus/pci/devices/<addr>/uevent` prints it.
        uevent = (f"PCI_CLASS={int(pci_class, 16):X}\nPCI_ID={vendor[2:].upper()}:{device[2:].upper()}\n"
                  f"PCI_SLOT_NAME={address}\n")
        if driver:
            uevent = f"DRIVER={driver}\n" + uevent
        self.file(f"{base}/uevent", uevent)

    def kfd_node(self, node: int, gfx_target_version: int, device_id: int = 0) -> None:
        props = (f"cpu_cores_count {96 if gfx_target_version == 0 else 0}\nsimd_count {0 if gfx_target_version == 0 else 1216}\n"
                 f"mem_banks_count 1\ngfx_target_version {gfx_target_version}\nvendor_id {4098 if gfx_target_version else 0}\n"
                 f"device_id {device_id}\nlocation_id {node * 256}\ndrm_render_minor {127 + node if gfx_target_version else 0}\n")
        self.file(f"/sys/class/kfd/kfd/topology/nodes/{node}/properties", props)

    def host(self, env: dict | None = None, **kw) -> Host:
        return Host.for_test(self.root, env=env, **kw)


def build_fake_libcuda(out: Path, version: int = 12080, cc: str = "9.0", name: str = "NVIDIA H200", count: int = 1,
                       init_rc: int = 0, hang: bool = False, mem_mib: int = 143771) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "gcc is needed to build the fake libcuda.so.1 (scripts/test installs it)"
    major, minor = cc.split(".")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / "fake_libcuda.c"
    src.write_text(FAKE_LIBCUDA)
    defines = [f"-DVERSION={version}", f"-DCC_MAJOR={major}", f"-DCC_MINOR={minor}", f'-DNAME="{name}"', f"-DCOUNT={count}",
               f"-DINIT_RC={init_rc}", f"-DHANG={int(hang)}", f"-DMEM_MIB={mem_mib}"]
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(out), *defines, str(src)], check=True)
    src.unlink()
    return out


def libtorch_tree(machine: FakeMachine, path: str, version: str, variant: str, libs: tuple[str, ...] = ()) -> str:
    """A minimal libtorch tree as releases lay it out: build-version, headers, libc10."""
    root = machine.root / path.lstrip("/")
    (root / "include/torch/csrc/api/include/torch").mkdir(parents=True, exist_ok=True)
    (root / "lib").mkdir(parents=True, exist_ok=True)
    (root / "build-version").write_text(f"{version}+{variant}\n")
    (root / "lib/libc10.so").write_bytes(b"")
    (root / "lib/libtorch.so").write_bytes(b"")
    for lib in libs:
        (root / "lib" / lib).write_bytes(b"")
    return path


def check_gpu(fake: FakeMachine, env: dict | None = None, trees: dict[str, tuple[str, str]] | None = None, **kw):
    """detect + judge as `doctor check` does: (gpu facts, GPU area). `trees` maps a path to
    (version, variant); the first is named by LIBTORCH, the others are found by CMAKE_PREFIX_PATH."""
    from doctor.check import gpu_report

    env = dict(env or {})
    for i, (path, (version, variant)) in enumerate((trees or {}).items()):
        libs = ("libtorch_cuda.so",) if variant.startswith("cu") else ("libtorch_hip.so",) if variant.startswith("rocm") else ()
        if not (fake.root / path.lstrip("/") / "build-version").exists():
            libtorch_tree(fake, path, version, variant, libs)
        if i == 0:
            env["LIBTORCH"] = path
        else:
            (fake.root / path.lstrip("/") / "share/cmake/Torch").mkdir(parents=True, exist_ok=True)
            (fake.root / path.lstrip("/") / "share/cmake/Torch/TorchConfig.cmake").write_text("")
            env["CMAKE_PREFIX_PATH"] = ":".join(filter(None, [env.get("CMAKE_PREFIX_PATH"), path]))
    gpu, _python, _libtorch, area = gpu_report(fake.host(env, **kw))
    return gpu, area


def findings(area, finding_id: str | None = None):
    return [f for f in area.findings if finding_id is None or f.id == finding_id]


# Fixtures (conftest.py files of the folders that use them import these).
@pytest.fixture
def machine(tmp_path) -> FakeMachine:
    return FakeMachine(tmp_path / "root")


@pytest.fixture(scope="session")
def libcuda(tmp_path_factory):
    """libcuda(**kw) → a compiled fake libcuda.so.1, built once per set of arguments."""
    built = {}

    def make(**kw):
        key = tuple(sorted(kw.items()))
        if key not in built:
            built[key] = build_fake_libcuda(tmp_path_factory.mktemp("libcuda") / "libcuda.so.1", **kw)
        return built[key]

    return make
