"""NVIDIA GPUs and their driver, found without importing torch.

Layered like the peers (uv, conda): an explicit override, then files (the kernel module's
version, /proc, device nodes, the driver libraries), and only when those show an NVIDIA
driver, two commands at once, each with a timeout: `nvidia-smi` for the GPUs and a spawned
Python child that asks libcuda (or NVML) for the CUDA version the driver supports. The driver
library can hang or crash its caller, so it is never loaded into the doctor's own process.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import PurePath

from doctor.catalog.cuda import DRIVER_LIBRARIES, NVML_LIBRARIES, parse_cuda_version
from doctor.formats import excerpt
from doctor.host import Host, RunResult
from doctor.model import Evidence
from doctor.probe.devices import PciDevice, ProbeProblem, why_failed
from doctor.record import record

SMI_FIELDS = ("index", "name", "driver_version", "memory.total", "compute_cap")
SMI_FIELDS_OLD = SMI_FIELDS[:-1]  # drivers before ~510 reject compute_cap
MODULE_VERSION = "/sys/module/nvidia/version"
PROC_VERSION = "/proc/driver/nvidia/version"
PROC_GPUS = "/proc/driver/nvidia/gpus"
WSL_LIB = "/usr/lib/wsl/lib"
NIXOS_LIB = "/run/opengl-driver/lib"
LIB_DIRS = (
    "/usr/lib64/nvidia", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    WSL_LIB, NIXOS_LIB,
)
CUDA_LIBS = DRIVER_LIBRARIES
NVML_LIBS = NVML_LIBRARIES
OVERRIDE = "DOCTOR_CUDA_DRIVER_VERSION"
SMI = "nvidia-smi"
NVML = "NVML"
LIBCUDA = "libcuda cuDriverGetVersion"
DERIVED = "derived from the driver version (toolkit table)"
ENV_OVERRIDE = f"env {OVERRIDE}"

# Which source's answer wins when several report the driver version, first first (like
# libtorch's candidate precedence): the user's override, then the kernel module's own files
# (they name the driver actually loaded), then what user space reports.
DRIVER_VERSION_PRECEDENCE: tuple[str, ...] = (ENV_OVERRIDE, MODULE_VERSION, PROC_VERSION, SMI, NVML)
# The same for the newest CUDA version the driver supports: the driver's own answer beats a
# derivation from the toolkit table.
DRIVER_CUDA_PRECEDENCE: tuple[str, ...] = (ENV_OVERRIDE, LIBCUDA, NVML, DERIVED)

# Raw states of "NVIDIA present but no GPU reachable" (NvidiaFacts.unreachable); the words and
# fixes for each live in doctor/diagnose/gpu_states.py.
UNREACHABLE_STATES: tuple[str, ...] = (
    "smi-no-driver",  # nvidia-smi: couldn't communicate with the NVIDIA driver
    "smi-mismatch",  # nvidia-smi: Driver/library version mismatch
    "smi-no-devices",  # nvidia-smi: No devices were found
    "no-permission",  # this user may not open /dev/nvidia* (nvidia-smi: Insufficient Permissions)
    "cuinit-failed",  # cuInit returned an error (see cuda_init)
    "no-device-node",  # driver library here, no /dev/nvidiaN (container without --gpus)
    "no-driver-libraries",  # /dev/nvidiaN here, no libcuda.so.1 (libraries not mounted)
    "driver-not-loaded",  # a card on the PCI bus, no NVIDIA kernel module
    "no-tools",  # the module is loaded but neither nvidia-smi nor libcuda exists
    "no-gpu-reported",  # the driver answered without any GPU
)
CHILD_NAME = "the libcuda child process"

CUDA_ERRORS = {
    0: "CUDA_SUCCESS",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    999: "CUDA_ERROR_UNKNOWN",
}

SMI_NO_DRIVER = "couldn't communicate with the NVIDIA driver"
SMI_MISMATCH = "Driver/library version mismatch"
SMI_NO_DEVICES = "No devices were found"
SMI_NO_PERMISSION = "Insufficient Permissions"


@record
class NvidiaGpu:
    """One NVIDIA GPU as the driver reports it."""
    index: int  # nvidia-smi's index (PCI bus order)
    name: str
    memory_mib: int | None
    compute_capability: str | None  # "9.0"; None when the driver cannot say
    visible: bool = True  # not hidden by CUDA_VISIBLE_DEVICES
    source: str = "nvidia-smi"  # "nvidia-smi" | "libcuda" | "/proc/driver/nvidia/gpus"
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def label(self) -> str:
        cc = f", compute capability {self.compute_capability}" if self.compute_capability else ""
        return f"GPU {self.index}: {self.name}{cc}"


@record
class NvidiaFacts:
    """The NVIDIA driver, its CUDA version and GPUs, and how they were found."""
    present: bool = False  # any sign of NVIDIA hardware or of its driver
    driver_version: str | None = None  # "570.124.06"
    driver_version_source: str = ""
    driver_cuda_version: str | None = None  # "12.8": the newest CUDA the driver supports
    driver_cuda_source: str = ""  # "libcuda cuDriverGetVersion", "NVML", "derived from the driver version", env
    driver_platform: str = "linux"  # which floor table applies: "linux" | "windows" (WSL uses the Windows driver)
    kernel_module: str | None = None  # "open" | "proprietary"
    gpus: list[NvidiaGpu] = field(default_factory=list)
    pci_devices: list[str] = field(default_factory=list)
    device_nodes: list[str] = field(default_factory=list)  # /dev/nvidia0, /dev/nvidiactl, /dev/dxg
    denied_nodes: list[str] = field(default_factory=list)  # of those, the ones this user may not open read-write
    libraries: list[str] = field(default_factory=list)  # driver libraries found (libcuda, NVML)
    nvidia_smi: str | None = None  # its path, when there is one
    smi_status: str = "not run"  # "ok", "not run", "no driver", "driver/library mismatch", "no devices", "no permission", "failed", "timed out"
    smi_message: str = ""
    cuda_init: str | None = None  # "CUDA_SUCCESS", "CUDA_ERROR_NO_DEVICE (100)", ... from the child
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES, as set
    visible_note: str = ""
    wsl: bool = False
    nixos: bool = False
    reachable: bool = False  # the driver answered and reported at least one GPU
    unreachable: str = ""  # one of UNREACHABLE_STATES when present but not reachable ("" also when a probe failed: unknown)
    pci_addresses: list[str] = field(default_factory=list)  # NVIDIA cards on the PCI bus
    pci_bound_drivers: list[str] = field(default_factory=list)  # kernel drivers bound to them ("nouveau", "vfio-pci")
    driver_versions: dict[str, str] = field(default_factory=dict)  # what each source said; DRIVER_VERSION_PRECEDENCE picks
    driver_cuda_versions: dict[str, str] = field(default_factory=dict)  # the same for the CUDA version
    override: str | None = None  # DOCTOR_CUDA_DRIVER_VERSION, as set
    driver_signs: list[str] = field(default_factory=list)  # what showed an NVIDIA driver before any command ran
    problems: list[ProbeProblem] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def visible_gpus(self) -> list[NvidiaGpu]:
        return [g for g in self.gpus if g.visible]


# -- pure parsers --


def parse_module_version(text: str) -> str | None:
    """/sys/module/nvidia/version: just `550.144.03`."""
    value = text.strip()
    return value if re.fullmatch(r"\d+(\.\d+)+", value) else None


_PROC = re.compile(r"NVRM version:\s+NVIDIA UNIX\s+(.*?)\s+(\d+\.\d+(?:\.\d+)?)\s")


def parse_proc_version(text: str) -> tuple[str | None, str | None]:
    """(driver version, "open" | "proprietary") from /proc/driver/nvidia/version's first line.
    Both formats seen: `... Open Kernel Module for x86_64  550.144.03  Release Build ...` and
    `... x86_64 Kernel Module  375.74  Wed Jun 14 ...`."""
    first = text.splitlines()[0] if text else ""
    m = _PROC.search(first + " ")
    if not m:
        return None, None
    return m.group(2), ("open" if "Open Kernel Module" in m.group(1) else "proprietary")


def parse_proc_gpu_information(text: str) -> dict[str, str]:
    """/proc/driver/nvidia/gpus/<pci>/information: `Model: \t\t NVIDIA H200` lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def _is_int(text: str) -> bool:
    # Bounded: int() of a number past 4300 digits raises (found by fuzzing).
    return text.isascii() and text.isdigit() and len(text) <= 18


def _na(value: str) -> str | None:
    v = value.strip()
    return None if not v or v.startswith("[") or v in ("N/A", "Not Supported") else v


def parse_smi_csv(text: str, fields: tuple[str, ...] = SMI_FIELDS) -> list[dict[str, str | None]]:
    """nvidia-smi --query-gpu=... --format=csv,noheader,nounits: one line per GPU, `, ` between
    fields; `[N/A]` / `[Not Supported]` become None. Lines of the wrong width are skipped."""
    import csv

    rows = []
    for record in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(record) != len(fields):
            continue
        row = {k: _na(v) for k, v in zip(fields, record)}
        if row.get("index") is None or not _is_int(row["index"]):
            continue
        rows.append(row)
    return rows


def cuda_error(rc: int) -> str:
    name = CUDA_ERRORS.get(rc)
    return f"{name} ({rc})" if name and rc else (name or f"CUDA error {rc}")


@record
class ChildReport:
    """What the driver library (libcuda, NVML) answered in a child process, which may hang or crash."""
    library: str | None = None
    driver_cuda: int | None = None
    cu_init: int | None = None
    devices: list[dict] = field(default_factory=list)
    nvml_driver: str | None = None
    nvml_cuda: int | None = None
    errors: list[str] = field(default_factory=list)


def parse_child_output(text: str) -> ChildReport:
    """The child's JSON lines (see CHILD); whatever it printed before a hang or crash counts."""
    report = ChildReport()
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "dlopen" and not event.get("ok"):
            report.errors.append(str(event.get("error")))
        elif kind == "cuDriverGetVersion":
            report.library = event.get("path")
            if event.get("rc") == 0 and isinstance(event.get("version"), int):
                report.driver_cuda = event["version"]
            else:
                rc = event.get("rc")
                report.errors.append(f"cuDriverGetVersion: {cuda_error(rc if isinstance(rc, int) and rc else 999)}")
        elif kind == "cuInit" and isinstance(event.get("rc"), int):
            report.cu_init = event["rc"]
        elif kind == "device":
            report.devices.append(event)
        elif kind == "nvml":
            report.library = report.library or event.get("path")
            if event.get("rc") == 0:
                report.nvml_cuda = event.get("version") if isinstance(event.get("version"), int) else None
                report.nvml_driver = event.get("driver") if isinstance(event.get("driver"), str) else None
            else:
                report.errors.append(f"NVML: error {event.get('rc')}")
        elif kind == "error":
            report.errors.append(str(event.get("error")))
    return report


@record
class Visibility:
    """Which GPUs CUDA_VISIBLE_DEVICES leaves to torch."""
    indices: list[int] | None  # visible nvidia-smi indices; None when it cannot be worked out (UUIDs)
    note: str


def parse_visible_devices(value: str | None, count: int) -> Visibility:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: a comma list, parsing stops at the first entry
    that is not a valid, new index; empty or invalid means no GPU at all."""
    if value is None:
        return Visibility(list(range(count)), "")
    text = value.strip()
    if not text:
        return Visibility([], "CUDA_VISIBLE_DEVICES is set but empty: CUDA sees no GPU")
    out: list[int] = []
    for raw in text.split(","):
        item = raw.strip()
        if item.upper().startswith(("GPU-", "MIG-")):
            return Visibility(None, f"CUDA_VISIBLE_DEVICES={value} selects GPUs by UUID; every GPU is checked")
        if not _is_int(item) or int(item) >= count or int(item) in out:
            break
        out.append(int(item))
    if not out:
        return Visibility([], f"CUDA_VISIBLE_DEVICES={value} names no valid GPU: CUDA sees none")
    hidden = [i for i in range(count) if i not in out]
    note = f"CUDA_VISIBLE_DEVICES={value} hides GPU {', '.join(map(str, hidden))}" if hidden else f"CUDA_VISIBLE_DEVICES={value}"
    return Visibility(out, note)


def parse_override(value: str) -> tuple[str | None, str | None]:
    """DOCTOR_CUDA_DRIVER_VERSION: a driver version ("550.54.14") or the CUDA version a driver
    supports ("12.4"); returns (driver, cuda). Raises ValueError for anything else."""
    v = value.strip()
    if not re.fullmatch(r"\d{1,9}(\.\d{1,9}){0,2}", v):
        raise ValueError(v)
    major = int(v.split(".")[0])
    if major >= 100:
        return v, None
    if major >= 7 and "." in v:
        return None, ".".join(v.split(".")[:2])
    raise ValueError(v)


# -- the child that talks to the driver library --

CHILD = r"""
import ctypes, json, os, sys
def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()
def load(path):
    try:
        return ctypes.CDLL(path)
    except OSError as exc:
        say(event="dlopen", path=path, ok=False, error=str(exc))
        return None
def cuda(lib, path):
    v = ctypes.c_int(0)
    rc = lib.cuDriverGetVersion(ctypes.byref(v))
    say(event="cuDriverGetVersion", path=path, rc=rc, version=v.value)
    rc = lib.cuInit(0)
    say(event="cuInit", rc=rc)
    if rc != 0:
        return
    n = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return
    for i in range(n.value):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), i) != 0:
            continue
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)
        major, minor, mem = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_size_t(0)
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        try:
            lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        except AttributeError:
            pass
        say(event="device", index=i, name=name.value.decode("utf-8", "replace"),
            cc="%d.%d" % (major.value, minor.value), memory=mem.value)
def nvml(lib, path):
    rc = lib.nvmlInit_v2()
    v, buf = ctypes.c_int(0), ctypes.create_string_buffer(96)
    if rc == 0:
        rc = lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(v))
        lib.nvmlSystemGetDriverVersion(buf, 96)
        lib.nvmlShutdown()
    say(event="nvml", path=path, rc=rc, version=v.value, driver=buf.value.decode("ascii", "replace"))
args = sys.argv[1:]
split = args.index("--nvml") if "--nvml" in args else len(args)
try:
    for path in args[:split]:
        lib = load(path)
        if lib is not None:
            cuda(lib, path)
            break
    else:
        for path in args[split + 1:]:
            lib = load(path)
            if lib is not None:
                nvml(lib, path)
                break
except Exception as exc:
    say(event="error", error="%s: %s" % (type(exc).__name__, exc))
"""


# -- the probe --


def detect_nvidia(host: Host, pci: list[PciDevice], timeout: float, ld_cache: dict[str, list[str]] | None = None) -> NvidiaFacts:
    facts = NvidiaFacts()
    if host.system == "Darwin":
        return facts
    _read_override(host, facts)
    _read_files(host, facts, pci, ld_cache or {})
    smi = _find_smi(host, facts)
    if smi:
        facts.driver_signs.append(f"nvidia-smi at {smi}")
    driver_sign = bool(facts.driver_signs)
    libs_cuda = [lib for lib in facts.libraries if "nvidia-ml" not in lib]
    libs_nvml = [lib for lib in facts.libraries if "nvidia-ml" in lib]
    want_child = bool(libs_cuda or libs_nvml) or (host.system == "Windows" and driver_sign)

    jobs = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        if smi and driver_sign:
            jobs["smi"] = pool.submit(_run_smi, host, smi, timeout)
        if want_child:
            jobs["child"] = pool.submit(_run_child, host, libs_cuda, libs_nvml, timeout)
        results = {k: f.result() for k, f in jobs.items()}
    if "smi" in results:
        _take_smi(facts, *results["smi"])
    if "child" in results:
        _take_child(facts, results["child"])
    _settle(host, facts, pci)
    return facts


def _read_override(host: Host, facts: NvidiaFacts) -> None:
    from doctor.errors import DoctorError

    raw = host.env.get(OVERRIDE)
    if not raw:
        return
    try:
        driver, cuda = parse_override(raw)
    except ValueError:
        raise DoctorError(
            f"{OVERRIDE}={raw!r} is neither a driver version nor a CUDA version",
            f"give a driver version ({OVERRIDE}=550.54.14) or the CUDA version it supports ({OVERRIDE}=12.4)",
            error_id="env.bad-value",
        ) from None
    facts.override = raw
    ev = Evidence("env", OVERRIDE, raw)
    facts.evidence.append(ev)
    if driver:
        facts.driver_versions[ENV_OVERRIDE] = driver
    if cuda:
        facts.driver_cuda_versions[ENV_OVERRIDE] = cuda


def _read_files(host: Host, facts: NvidiaFacts, pci: list[PciDevice], ld_cache: dict[str, list[str]]) -> None:
    proc_version = host.read_text("/proc/version", limit=4096) or ""
    facts.wsl = host.exists("/dev/dxg") or "microsoft" in proc_version.lower()
    facts.nixos = host.exists("/etc/NIXOS") or host.is_dir(NIXOS_LIB)
    if facts.wsl:
        facts.driver_platform = "windows"
        facts.evidence.append(Evidence("file", "/dev/dxg" if host.exists("/dev/dxg") else "/proc/version", "WSL"))
    if host.system == "Windows":
        facts.driver_platform = "windows"

    text = host.read_text(MODULE_VERSION, limit=256)
    version = parse_module_version(text) if text else None
    if version:
        facts.evidence.append(Evidence("file", MODULE_VERSION, version))
        facts.driver_signs.append(MODULE_VERSION)
        facts.present = True
        facts.driver_versions[MODULE_VERSION] = version
    text = host.read_text(PROC_VERSION, limit=4096)
    if text:
        proc_driver, module = parse_proc_version(text)
        facts.evidence.append(Evidence("file", PROC_VERSION, text.splitlines()[0].strip() if text.strip() else ""))
        facts.driver_signs.append(PROC_VERSION)
        facts.present = True
        facts.kernel_module = module or "unknown"
        if proc_driver:
            facts.driver_versions[PROC_VERSION] = proc_driver
    for i, pci_dir in enumerate(host.listdir(PROC_GPUS)):
        info = parse_proc_gpu_information(host.read_text(PurePath(PROC_GPUS) / pci_dir / "information", limit=8192) or "")
        if info.get("Model"):
            minor = info.get("Device Minor", "")
            index = int(minor) if _is_int(minor) else i
            facts.gpus.append(
                NvidiaGpu(index, info["Model"], None, None, source=PROC_GPUS,
                          evidence=[Evidence("file", f"{PROC_GPUS}/{pci_dir}/information", f"Model: {info['Model']}")])
            )
    for dev in pci:
        if dev.vendor == "nvidia":
            facts.present = True
            facts.pci_devices.append(dev.label)
            facts.pci_addresses.append(dev.address)
            if dev.driver and dev.driver not in facts.pci_bound_drivers:
                facts.pci_bound_drivers.append(dev.driver)
            facts.evidence.append(Evidence("file", f"/sys/bus/pci/devices/{dev.address}", dev.label))
    facts.device_nodes = [f"/dev/{n}" for n in host.listdir("/dev") if re.fullmatch(r"nvidia(\d+|ctl|-uvm)", n)]
    if facts.wsl and host.exists("/dev/dxg"):
        facts.device_nodes.append("/dev/dxg")
    # CUDA opens them read-write; a user outside their group (mode 0660, NVreg_DeviceFileMode) or
    # a container under SELinux gets "no CUDA-capable device" and nothing that says why.
    facts.denied_nodes = [n for n in facts.device_nodes if n != "/dev/dxg" and not host.access(n, os.R_OK | os.W_OK)]
    if facts.device_nodes:
        facts.driver_signs.append(" ".join(facts.device_nodes))
        facts.present = True
        facts.evidence.append(Evidence("file", "/dev", " ".join(facts.device_nodes)))
    facts.libraries = _find_libraries(host, ld_cache)
    if facts.libraries:
        facts.present = True
        facts.evidence.append(Evidence("file", facts.libraries[0], "driver library"))


def _find_libraries(host: Host, ld_cache: dict[str, list[str]]) -> list[str]:
    """Driver libraries, as paths the doctor sees: the ld.so cache first, then the usual folders."""
    found: list[str] = []
    for names in (CUDA_LIBS, NVML_LIBS):
        hits: list[str] = []
        for name in names:
            hits.extend(p for p in ld_cache.get(name, []) if host.exists(p))
        for folder in LIB_DIRS:
            for name in names:
                path = str(PurePath(folder) / name)
                if host.exists(path):
                    hits.append(path)
        for p in hits:
            if p not in found and "/stubs/" not in p:
                found.append(p)
    return found


def _find_smi(host: Host, facts: NvidiaFacts) -> str | None:
    smi = host.which("nvidia-smi")
    if smi is None and facts.wsl and host.exists(PurePath(WSL_LIB) / "nvidia-smi"):
        smi = str(host.real(PurePath(WSL_LIB) / "nvidia-smi"))
    facts.nvidia_smi = smi
    return smi


def _smi_argv(smi: str, fields: tuple[str, ...]) -> list[str]:
    return [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]


def _run_smi(host: Host, smi: str, timeout: float) -> tuple[RunResult, tuple[str, ...], RunResult | None]:
    first = host.run(_smi_argv(smi, SMI_FIELDS), timeout=timeout)
    said = first.stdout + first.stderr
    if first.returncode not in (0, None) and "compute_cap" in said and "not a valid field" in said:
        return first, SMI_FIELDS_OLD, host.run(_smi_argv(smi, SMI_FIELDS_OLD), timeout=timeout)
    return first, SMI_FIELDS, None


_excerpt = excerpt


def _take_smi(facts: NvidiaFacts, first: RunResult, fields: tuple[str, ...], retry: RunResult | None) -> None:
    facts.evidence.append(Evidence("command", first.command, _excerpt(first.stdout + first.stderr) or why_failed(first)))
    result = first
    if retry is not None:
        facts.evidence.append(Evidence("command", retry.command, _excerpt(retry.stdout + retry.stderr)))
        facts.smi_message = "this driver's nvidia-smi cannot report compute_cap"
        result = retry
    said = result.stdout + result.stderr
    if result.timed_out:
        facts.smi_status = "timed out"
        facts.problems.append(ProbeProblem("nvidia-smi", "the NVIDIA GPUs", why_failed(result), result.seconds,
                                           [Evidence("command", result.command, result.error)]))
        return
    if result.returncode is None:
        facts.smi_status = "failed"
        facts.problems.append(ProbeProblem("nvidia-smi", "the NVIDIA GPUs", why_failed(result), result.seconds))
        return
    facts.present = True
    if result.returncode != 0:
        if SMI_NO_DRIVER in said:
            facts.smi_status, facts.smi_message = "no driver", _excerpt(said)
        elif SMI_MISMATCH in said:
            facts.smi_status, facts.smi_message = "driver/library mismatch", _excerpt(said)
        elif SMI_NO_DEVICES in said:
            facts.smi_status, facts.smi_message = "no devices", _excerpt(said)
        elif SMI_NO_PERMISSION in said:
            facts.smi_status, facts.smi_message = "no permission", _excerpt(said)
        else:
            facts.smi_status, facts.smi_message = "failed", _excerpt(said)
            facts.problems.append(ProbeProblem("nvidia-smi", "the NVIDIA GPUs", f"exit {result.returncode}: {_excerpt(said, 200)}",
                                               result.seconds, [Evidence("command", result.command, _excerpt(said))]))
        return
    rows = parse_smi_csv(result.stdout, fields)
    facts.smi_status = "ok"
    gpus = []
    for row in rows:
        memory, cc = row.get("memory.total"), row.get("compute_cap")
        gpus.append(
            NvidiaGpu(
                int(row["index"] or 0),
                row.get("name") or "unknown NVIDIA GPU",
                # MiB: nine digits is a petabyte; a longer run of digits is not memory (and 400 of them overflow)
                int(float(memory)) if memory and re.fullmatch(r"\d{1,9}(\.\d{1,6})?", memory) else None,
                # a capability the catalog cannot read is one the driver did not give: the name and libcuda may
                cc if cc and re.fullmatch(r"\d{1,2}\.\d{1,2}", cc) else None,
                evidence=[Evidence("command", result.command, ", ".join(v or "[N/A]" for v in row.values()))],
            )
        )
        driver = row.get("driver_version")
        if driver and SMI not in facts.driver_versions:
            facts.driver_versions[SMI] = driver
    facts.gpus = gpus  # nvidia-smi's list supersedes /proc's names


def _run_child(host: Host, cuda_libs: list[str], nvml_libs: list[str], timeout: float) -> RunResult:
    real = [str(host.real(p)) for p in cuda_libs]
    if host.root == PurePath("/") and host.system == "Linux":
        real.append("libcuda.so.1")  # let the system loader search too
    if host.system == "Windows":
        real.append("nvcuda.dll")
    argv = [host.python, "-I", "-S", "-c", CHILD, *real, "--nvml", *(str(host.real(p)) for p in nvml_libs)]
    # conda's lesson: an empty CUDA_VISIBLE_DEVICES makes cuInit fail (100), an invalid one 101.
    env = {k: v for k, v in host.env.items() if k != "CUDA_VISIBLE_DEVICES"}
    return host.run(argv, timeout=timeout, env=env)


def _take_child(facts: NvidiaFacts, result: RunResult) -> None:
    report = parse_child_output(result.stdout)
    shown = f"{PurePath(report.library).name} in a child process" if report.library else "libcuda in a child process"
    if result.timed_out:
        facts.problems.append(ProbeProblem(CHILD_NAME, "the CUDA driver's version and devices", why_failed(result), result.seconds,
                                           [Evidence("command", shown, _excerpt(result.stdout) or result.error)]))
    elif result.returncode not in (0, None) and not report.devices:
        msg = _excerpt(result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}", 200)
        facts.problems.append(ProbeProblem(CHILD_NAME, "the CUDA driver's version", f"failed: {msg}", result.seconds))
    if report.driver_cuda is not None:
        version = parse_cuda_version(report.driver_cuda)
        facts.evidence.append(Evidence("command", f"cuDriverGetVersion ({shown})", str(report.driver_cuda)))
        if version:
            facts.driver_cuda_versions[LIBCUDA] = version
    elif report.nvml_cuda:
        version = parse_cuda_version(report.nvml_cuda)
        facts.evidence.append(Evidence("command", f"nvmlSystemGetCudaDriverVersion_v2 ({shown})", str(report.nvml_cuda)))
        if version:
            facts.driver_cuda_versions[NVML] = version
    if report.nvml_driver:
        facts.driver_versions[NVML] = report.nvml_driver
    if report.cu_init is not None:
        facts.cuda_init = cuda_error(report.cu_init)
        facts.evidence.append(Evidence("command", f"cuInit ({shown})", facts.cuda_init))
    for e in report.errors:
        facts.evidence.append(Evidence("command", shown, e))
    if report.devices and facts.smi_status != "ok":
        # nvidia-smi absent or unable: the driver API's own list
        facts.gpus = [
            NvidiaGpu(int(d.get("index", i)), str(d.get("name") or "unknown NVIDIA GPU"),
                      int(d["memory"]) // (1 << 20) if isinstance(d.get("memory"), int) and d["memory"] else None,
                      d.get("cc") if isinstance(d.get("cc"), str) else None, source="libcuda",
                      evidence=[Evidence("command", f"cuDeviceGetAttribute ({shown})", f"{d.get('name')}, {d.get('cc')}")])
            for i, d in enumerate(report.devices)
        ]
    elif report.devices:
        # nvidia-smi listed them; fill in compute capabilities an old driver's nvidia-smi could not give
        by_index = {int(d.get("index", -1)): d for d in report.devices}
        for gpu in facts.gpus:
            d = by_index.get(gpu.index)
            if gpu.compute_capability is None and d and isinstance(d.get("cc"), str):
                gpu.compute_capability = d["cc"]
                gpu.evidence.append(Evidence("command", f"cuDeviceGetAttribute ({shown})", f"compute capability {d['cc']}"))


def first_by_precedence(said: dict[str, str], precedence: tuple[str, ...]) -> tuple[str | None, str]:
    """(value, source) of the first source in `precedence` that said something."""
    for source in precedence:
        if said.get(source):
            return said[source], source
    return None, ""


def _settle(host: Host, facts: NvidiaFacts, pci: list[PciDevice]) -> None:
    """Versions by precedence, reachability and visibility, once every source has spoken."""
    from doctor.catalog.cuda import cuda_for_driver

    facts.driver_version, facts.driver_version_source = first_by_precedence(facts.driver_versions, DRIVER_VERSION_PRECEDENCE)
    if facts.driver_version:
        derived = cuda_for_driver(facts.driver_version, facts.driver_platform)
        if derived:
            facts.driver_cuda_versions[DERIVED] = derived
    facts.driver_cuda_version, facts.driver_cuda_source = first_by_precedence(facts.driver_cuda_versions, DRIVER_CUDA_PRECEDENCE)
    listed = [g for g in facts.gpus if g.source != PROC_GPUS]
    answered = facts.smi_status == "ok" or (facts.cuda_init == "CUDA_SUCCESS")
    facts.reachable = bool(listed) and answered
    if not facts.reachable and facts.present:
        facts.unreachable = _unreachable_state(host, facts)
    cvd = host.env.get("CUDA_VISIBLE_DEVICES")
    facts.visible_devices = cvd
    if facts.gpus:
        seen = parse_visible_devices(cvd, max(g.index for g in facts.gpus) + 1)
        if seen.indices is not None:
            for g in facts.gpus:
                g.visible = g.index in seen.indices
        facts.visible_note = seen.note
        names = {g.name for g in facts.gpus}
        if cvd and len(names) > 1 and host.env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            facts.visible_note += (
                "; CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi by PCI bus,"
                " so the indices may name different GPUs"
            )
        if cvd is not None:
            facts.evidence.append(Evidence("env", "CUDA_VISIBLE_DEVICES", cvd))


def _unreachable_state(host: Host, facts: NvidiaFacts) -> str:
    """Which raw state keeps the GPUs out of reach (UNREACHABLE_STATES); "" = unknown, because a
    probe failed (reported as such: probe.failed)."""
    if facts.smi_status == "no driver":
        return "smi-no-driver"
    if facts.smi_status == "driver/library mismatch":
        return "smi-mismatch"
    if facts.smi_status == "no devices":
        return "smi-no-devices"
    linux = host.system == "Linux" and not facts.wsl
    nodes = [n for n in facts.device_nodes if re.search(r"nvidia\d+$", n)]
    if facts.smi_status == "no permission" or (linux and nodes and (
            set(nodes) <= set(facts.denied_nodes) or "/dev/nvidiactl" in facts.denied_nodes)):
        return "no-permission"
    if facts.cuda_init and facts.cuda_init != "CUDA_SUCCESS":
        return "cuinit-failed"
    if linux and facts.libraries and not nodes:
        return "no-device-node"
    if linux and nodes and not facts.libraries:
        return "no-driver-libraries"
    if facts.pci_addresses and not any(s in facts.driver_signs for s in (MODULE_VERSION, PROC_VERSION)):
        return "driver-not-loaded"
    if facts.smi_status in ("timed out", "failed") or facts.problems:
        return ""
    if not facts.nvidia_smi and not facts.libraries:
        return "no-tools"
    return "no-gpu-reported"
