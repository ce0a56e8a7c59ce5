"""AMD GPUs for ROCm: the KFD topology (one node per GPU, node 0 usually the CPU), /dev/kfd
access, the installed ROCm version, and the gfx targets a ROCm libtorch tree carries.

Files first: the topology answers everything; `rocm_agent_enumerator` runs only when /dev/kfd
exists but the topology cannot be read.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from pathlib import PurePath

from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.devices import PciDevice, ProbeProblem, why_failed
from doctor.record import record

TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"
KFD = "/dev/kfd"
ROCM_VERSION = "/opt/rocm/.info/version"
# Raw states of "AMD GPU present but ROCm cannot use it" (RocmFacts.unusable).
UNUSABLE_STATES: tuple[str, ...] = (
    "kfd-missing",  # the KFD topology lists GPUs, /dev/kfd is absent (not passed into the container)
    "no-kfd",  # a card on the PCI bus, no KFD at all (amdgpu not loaded, or not passed in)
    "kfd-not-writable",  # /dev/kfd exists, this user cannot open it
    "no-gfx-target",  # /dev/kfd usable, no GPU with a gfx target
)


@record
class AmdGpu:
    """One AMD GPU as ROCm reports it."""
    node: int  # KFD topology node
    gfx: str  # "gfx942"
    gfx_target_version: int  # 90402
    vendor_id: int | None = None
    device_id: int | None = None
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"node {self.node}: {self.gfx}" + (f" (device 0x{self.device_id:04x})" if self.device_id else "")


@record
class RocmFacts:
    """The ROCm stack and AMD GPUs, and how they were found."""
    present: bool = False
    gpus: list[AmdGpu] = field(default_factory=list)
    kfd: bool = False  # /dev/kfd exists
    kfd_writable: bool = False
    render_nodes: list[str] = field(default_factory=list)  # /dev/dri/renderD*
    rocm_version: str | None = None  # /opt/rocm/.info/version, informational (wheels bundle ROCm)
    pci_devices: list[str] = field(default_factory=list)
    visible_devices: str | None = None  # HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES
    usable: bool = False
    unusable: str = ""  # one of UNUSABLE_STATES when present but not usable; words in doctor/diagnose/gpu_states.py
    problems: list[ProbeProblem] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


# -- pure parsers --


def parse_kfd_properties(text: str) -> dict[str, int]:
    """`key value` lines of a KFD topology node's properties file."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"-?\d{1,18}", parts[1]):
            out[parts[0]] = int(parts[1])
    return out


def gfx_name(target_version: int) -> str | None:
    """major*10000 + minor*100 + stepping → the gfx name, minor and stepping written in hex:
    90010 → gfx90a, 90402 → gfx942, 110501 → gfx1151. 0 (a CPU node) → None."""
    if target_version <= 0:
        return None
    major, rest = divmod(target_version, 10000)
    minor, stepping = divmod(rest, 100)
    if minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_rocm_version(text: str) -> str | None:
    """`6.4.0-47` → "6.4.0"."""
    m = re.match(r"\s*(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


_GFX = re.compile(r"gfx[0-9a-f]{3,4}")


def gfx_targets_in_names(names: list[str]) -> list[str]:
    """gfx targets named by the files of rocBLAS' kernel library (`..._gfx942.co`, `gfx90a.dat`)."""
    found = {m for n in names for m in _GFX.findall(n)}
    return sorted(found, key=lambda g: (len(g), g))


# -- the probe --


def detect_rocm(host: Host, pci: list[PciDevice], timeout: float) -> RocmFacts:
    facts = RocmFacts()
    if host.system != "Linux":
        return facts
    for dev in pci:
        if dev.vendor == "amd":
            facts.present = True
            facts.pci_devices.append(dev.label)
            facts.evidence.append(Evidence("file", f"/sys/bus/pci/devices/{dev.address}", dev.label))
    for node in sorted(host.listdir(TOPOLOGY), key=lambda n: int(n) if n.isascii() and n.isdigit() else 1 << 30):
        path = PurePath(TOPOLOGY) / node / "properties"
        props = parse_kfd_properties(host.read_text(path, limit=16384) or "")
        gfx = gfx_name(props.get("gfx_target_version", 0))
        if gfx is None or not (node.isascii() and node.isdigit()):
            continue  # a CPU node
        facts.gpus.append(
            AmdGpu(int(node), gfx, props["gfx_target_version"], props.get("vendor_id"), props.get("device_id"),
                   [Evidence("file", str(path), f"gfx_target_version {props['gfx_target_version']}")])
        )
    facts.kfd = host.exists(KFD)
    facts.kfd_writable = facts.kfd and host.access(KFD, os.R_OK | os.W_OK)
    facts.render_nodes = [f"/dev/dri/{n}" for n in host.listdir("/dev/dri") if n.startswith("renderD")]
    if facts.kfd:
        facts.evidence.append(Evidence("file", KFD, "read-write" if facts.kfd_writable else "not writable by this user"))
    text = host.read_text(ROCM_VERSION, limit=256)
    if text:
        facts.rocm_version = parse_rocm_version(text)
        facts.evidence.append(Evidence("file", ROCM_VERSION, text.strip()))
    if facts.kfd and not facts.gpus:
        _enumerate_agents(host, facts, timeout)
    facts.present = facts.present or bool(facts.gpus)
    facts.visible_devices = host.env.get("HIP_VISIBLE_DEVICES") or host.env.get("ROCR_VISIBLE_DEVICES")
    facts.usable = bool(facts.gpus) and facts.kfd_writable
    if facts.present and not facts.usable:
        facts.unusable = _unusable_state(facts)
    return facts


def _enumerate_agents(host: Host, facts: RocmFacts, timeout: float) -> None:
    """rocm_agent_enumerator prints one gfx per line (gfx000 is the CPU)."""
    exe = host.which("rocm_agent_enumerator") or (
        str(host.real("/opt/rocm/bin/rocm_agent_enumerator")) if host.exists("/opt/rocm/bin/rocm_agent_enumerator") else None
    )
    if exe is None:
        return
    result = host.run([exe], timeout=timeout)
    if not result.ok:
        facts.problems.append(ProbeProblem("rocm_agent_enumerator", "the AMD GPU targets", why_failed(result),
                                           result.seconds))
        return
    for i, gfx in enumerate(line.strip() for line in result.stdout.splitlines()):
        if _GFX.fullmatch(gfx) and gfx != "gfx000":
            facts.gpus.append(AmdGpu(i, gfx, 0, evidence=[Evidence("command", result.command, gfx)]))


def _unusable_state(facts: RocmFacts) -> str:
    if not facts.kfd:
        return "kfd-missing" if facts.gpus else "no-kfd"
    if not facts.kfd_writable:
        return "kfd-not-writable"
    return "no-gfx-target"


def build_gfx_targets(host: Host, lib_dir: str) -> tuple[list[str], Evidence | None]:
    """The gfx targets a ROCm libtorch carries, read from its bundled rocBLAS kernel files
    (PyTorch's build copies only the files of the targets it was built for)."""
    folder = PurePath(lib_dir) / "rocblas" / "library"
    names = host.listdir(folder)
    targets = gfx_targets_in_names(names)
    if not targets:
        return [], None
    return targets, Evidence("file", str(folder), " ".join(targets))
