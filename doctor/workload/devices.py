"""Which devices this torch can use, and why the others cannot; shared by smoke and bench."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from doctor.model import Evidence, Finding, Level
from doctor.record import record

CHOICES = ("cpu", "cuda", "mps", "all")


@record(frozen=True)
class Unavailable:
    kind: str  # "cuda" | "mps"
    finding_id: str
    title: str
    detail: str
    fix: str
    evidence: list[Evidence]

    def finding(self, area: str, level: Level = Level.ERROR) -> Finding:
        return Finding(self.finding_id, level, self.title, self.detail, self.fix, area, self.evidence, subject=self.kind)


def why_unavailable(torch: Any, kind: str, env: dict[str, str]) -> Unavailable | None:
    """None when `kind` has at least one usable device here."""
    version = torch.__version__
    if kind == "cuda":
        built_for = getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None)
        ev = [Evidence("derived", "torch.version.cuda", str(getattr(torch.version, "cuda", None))),
              Evidence("derived", "torch.__version__", version)]
        if not built_for:
            return Unavailable("cuda", "cuda.not-compiled", f"torch {version} is a CPU-only build",
                               "This torch was built without CUDA, so it cannot use a GPU.",
                               "install a CUDA build of torch (https://pytorch.org/get-started/locally/), "
                               "or use --device cpu", ev)
        if not torch.cuda.is_available():
            visible = env.get("CUDA_VISIBLE_DEVICES")
            if visible is not None:
                ev.append(Evidence("env", "CUDA_VISIBLE_DEVICES", visible))
            return Unavailable("cuda", "cuda.no-device", f"torch {version} (CUDA {built_for}) sees no GPU",
                               "torch.cuda.is_available() is False: no driver loaded, no GPU passed into the "
                               "container, or CUDA_VISIBLE_DEVICES hides it.",
                               "run `doctor check` for the driver and GPUs it sees; in Docker add --gpus all", ev)
        return None
    if kind == "mps":
        backend = getattr(torch.backends, "mps", None)
        built = bool(backend and backend.is_built())
        if built and backend.is_available():
            return None
        why = ("This torch was built without MPS" if not built
               else "MPS needs macOS 12.3 or later on Apple silicon")
        return Unavailable("mps", "smoke.device-unavailable", f"MPS is not available to torch {version}",
                           why + ".", "use --device cpu (or cuda), or a macOS arm64 torch on Apple silicon",
                           [Evidence("derived", "torch.backends.mps.is_available()", "False")])
    return None


def select(torch: Any, choice: str, env: dict[str, str]) -> tuple[list[str], list[Unavailable], dict[str, str]]:
    """(devices to run on, requested-but-unavailable, a status line for every kind)."""
    why = {kind: why_unavailable(torch, kind, env) for kind in ("cuda", "mps")}
    status = {"cpu": "available"} | {k: f"not available: {w.title}" if w else "available" for k, w in why.items()}
    devices: list[str] = []
    missing: list[Unavailable] = []
    for kind in ["cpu", "cuda", "mps"] if choice == "all" else [choice]:
        reason = why.get(kind)
        if reason is not None:
            if choice != "all":  # "all" means every device there is; a missing kind is no error then
                missing.append(reason)
        elif kind == "cuda":
            devices.extend(f"cuda:{i}" for i in range(torch.cuda.device_count()))
        else:
            devices.append(kind)
    return devices, missing, status


def synchronizer(torch: Any, device: str) -> Callable[[], None]:
    """Wait for queued work on `device`; timing an asynchronous device without it measures nothing."""
    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize(device)
    if device == "mps":
        return torch.mps.synchronize
    return lambda: None


def device_name(torch: Any, device: str) -> str:
    """The device's name for a report title ("NVIDIA H200", "CPU")."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(device)
    if device == "mps":
        return "Apple GPU (MPS)"
    return "CPU"
