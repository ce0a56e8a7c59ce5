"""What the kernel shows without any driver's help: PCI display and accelerator devices
(sysfs), and the record of a GPU probe that failed. Shared by the NVIDIA, AMD and Intel probes.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import PurePath

from doctor.host import Host, RunResult
from doctor.model import Evidence
from doctor.record import record

PCI_ROOT = "/sys/bus/pci/devices"
VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
# 0x03xxxx display (VGA 0x0300, 3D 0x0302); 0x12xxxx processing accelerator (AMD Instinct).
GPU_CLASSES = ("0x03", "0x12")
DEFAULT_TIMEOUT = 5.0


@record
class PciDevice:
    """A display or accelerator device as sysfs lists it, driver or not."""
    address: str  # "0000:19:00.0"
    vendor: str  # "nvidia" | "amd" | "intel" | raw id
    vendor_id: str  # "0x10de"
    device_id: str  # "0x2335"
    pci_class: str  # "0x030200"
    driver: str | None  # the kernel driver bound to it: "nvidia", "nouveau", "amdgpu", "vfio-pci", None

    @property
    def label(self) -> str:
        bound = f"driver {self.driver}" if self.driver else "no driver bound"
        return f"{self.address} [{self.vendor_id[2:]}:{self.device_id[2:]}] class {self.pci_class}, {bound}"


@record
class ProbeProblem:
    """A probe that could not finish: reported as a `probe.failed` warning, never a crash."""

    probe: str  # "nvidia-smi", "the libcuda child process", "rocm_agent_enumerator", ...
    what: str  # what could not be determined
    error: str  # what went wrong, without the probe's name: "timed out after 5 s", "exit 2: …"
    seconds: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)


def why_failed(result: RunResult) -> str:
    """A RunResult's failure without the program's own path: "timed out after 5 s", "exit 2: …"."""
    error = result.error or (f"exit {result.returncode}" if result.returncode else "")
    prog = result.argv[0] if result.argv else ""
    return error[len(prog):].lstrip(": ").strip() if prog and error.startswith(prog) else error


def probe_timeout(host: Host) -> float:
    """Seconds each GPU subprocess may run: DOCTOR_PROBE_TIMEOUT, default 5."""
    from doctor.errors import DoctorError

    raw = host.env.get("DOCTOR_PROBE_TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise DoctorError(f"DOCTOR_PROBE_TIMEOUT={raw!r} is not a number of seconds", "e.g. DOCTOR_PROBE_TIMEOUT=10",
                          error_id="env.bad-value")
    return value


def scan_pci(host: Host) -> list[PciDevice]:
    """Display and accelerator devices on the PCI bus. Reads only `class` for the others, so a
    machine with a hundred devices costs a few milliseconds."""
    if host.system != "Linux":
        return []
    out = []
    for address in host.listdir(PCI_ROOT):
        base = PurePath(PCI_ROOT) / address
        pci_class = (host.read_text(base / "class", limit=64) or "").strip().lower()
        if not pci_class.startswith(GPU_CLASSES):
            continue
        vendor_id = (host.read_text(base / "vendor", limit=64) or "").strip().lower()
        device_id = (host.read_text(base / "device", limit=64) or "").strip().lower()
        out.append(
            PciDevice(address, VENDORS.get(vendor_id, vendor_id), vendor_id, device_id, pci_class, _bound_driver(host, base))
        )
    return out


def _bound_driver(host: Host, base: PurePath) -> str | None:
    """The kernel's `DRIVER=` line in the device's uevent (sysfs writes it only while a driver
    is bound): the same answer as the `driver` symlink, read through the Host."""
    for line in (host.read_text(base / "uevent", limit=4096) or "").splitlines():
        key, _, value = line.partition("=")
        if key == "DRIVER" and value.strip():
            return value.strip()
    return None
