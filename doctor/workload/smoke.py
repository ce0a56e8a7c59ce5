"""`doctor smoke`: prove that a machine really trains, on each device, with torchfn.

On every device: a tensor goes there and back bit-exactly, a small MLP gives the same
output there as on the CPU, its gradients are finite, and 60 Adam steps make the loss
fall. One verdict per device. torch is imported inside the functions only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from doctor import __version__
from doctor.model import Area, Evidence, Finding, Level, Report
from doctor.workload import first_line, require_torch
from doctor.workload.devices import device_name, select, synchronizer

SIZES = [16, 32, 4]
EXAMPLES = 256
LEARNING_RATE = 1e-2
MAX_CPU_DIFFERENCE = 1e-3  # float32 on two backends; TF32 or a different GEMM order stays well inside
MIN_FALL = 0.5  # the last loss must be below half the first


@dataclass
class SmokeResult:
    device: str
    name: str
    steps: int
    first_loss: float | None = None
    last_loss: float | None = None
    grads_finite: bool | None = None
    round_trip_exact: bool | None = None
    max_difference_from_cpu: float | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and not self.error


def run_device(torch: Any, device: str, steps: int = 60, seed: int = 0) -> SmokeResult:
    """Train the smoke MLP on `device`; never raises (an exception becomes `error`)."""
    import torchfn as fn

    result = SmokeResult(device, device_name(torch, device), steps)
    sync = synchronizer(torch, device)
    threads = torch.get_num_threads()
    # One CPU thread: this model is tiny, and on a busy machine OpenMP's waiting threads made
    # the same 60 steps take seconds instead of milliseconds. Speed is bench's question.
    torch.set_num_threads(1)
    start = time.perf_counter()
    try:
        # Data and params are made on the CPU from fixed seeds, so every device gets the same problem.
        g = torch.Generator().manual_seed(seed)
        x_cpu = torch.randn(EXAMPLES, SIZES[0], generator=g)
        teacher = torch.randn(SIZES[0], SIZES[-1], generator=g)
        y_cpu = (x_cpu @ teacher).argmax(dim=1)
        model = fn.mlp(SIZES)
        params_cpu = model.init(fn.key(seed))

        x = x_cpu.to(device)
        result.round_trip_exact = bool(torch.equal(x.to("cpu"), x_cpu))
        y = y_cpu.to(device)
        params = fn.to_device(params_cpu, device)
        with torch.no_grad():
            on_device = model(params, x).to("cpu")
            on_cpu = model(params_cpu, x_cpu)
        result.max_difference_from_cpu = float((on_device - on_cpu).abs().max())

        def loss_fn(p: Any, batch: tuple[Any, Any]) -> Any:
            return fn.cross_entropy(model(p, batch[0]), batch[1])

        first, grads = fn.value_and_grad(loss_fn, method="autograd")(params, (x, y))
        result.grads_finite = bool(torch.stack([torch.isfinite(t).all() for t in fn.leaves(grads)]).all())
        opt = fn.adam()
        state = opt.init(params)
        step = fn.train_step(loss_fn, opt)
        loss = first
        for _ in range(steps):
            params, state, loss = step(params, state, (x, y), LEARNING_RATE)
        sync()
        result.first_loss, result.last_loss = float(first), float(loss)
    except Exception as exc:  # the device's own error is the finding (no kernel image, OOM, ...)
        result.error = first_line(exc)
    finally:
        torch.set_num_threads(threads)
    result.seconds = round(time.perf_counter() - start, 3)
    result.problems = _problems(result)
    return result


def _problems(r: SmokeResult) -> list[str]:
    if r.error:
        return []
    out = []
    if r.round_trip_exact is False:
        out.append(f"a tensor copied cpu → {r.device} → cpu came back changed")
    if r.max_difference_from_cpu is not None and not r.max_difference_from_cpu <= MAX_CPU_DIFFERENCE:
        out.append(f"the model's output on {r.device} differs from the CPU's by {r.max_difference_from_cpu:.3g} "
                   f"(more than {MAX_CPU_DIFFERENCE:g})")
    if r.grads_finite is False:
        out.append("gradients contain NaN or infinity")
    if r.first_loss is not None and r.last_loss is not None:
        if not math.isfinite(r.last_loss):
            out.append(f"the loss became {r.last_loss}")
        elif not r.last_loss < MIN_FALL * r.first_loss:
            out.append(f"the loss did not fall: {r.first_loss:.4f} → {r.last_loss:.4f} in {r.steps} steps")
    return out


def area_for(r: SmokeResult) -> Area:
    name = f"smoke.{r.device}"
    what = f"torchfn MLP {'-'.join(map(str, SIZES))}, Adam lr {LEARNING_RATE:g}, {r.steps} full-batch steps"
    details = [what]
    if r.round_trip_exact is not None:
        details.append(f"cpu → {r.device} → cpu copy exact: {'yes' if r.round_trip_exact else 'NO'}")
    if r.max_difference_from_cpu is not None:
        details.append(f"output on {r.device} vs cpu: max |difference| {r.max_difference_from_cpu:.3g}")
    if r.grads_finite is not None:
        details.append(f"gradients finite: {'yes' if r.grads_finite else 'NO'}")
    if r.first_loss is not None:
        details.append(f"loss {r.first_loss:.4f} → {r.last_loss:.4f}")
    details.append(f"{r.seconds:.2f} s")
    evidence = [Evidence("derived", f"{what} on {r.device}",
                         r.error or f"loss {r.first_loss:.4f} → {r.last_loss:.4f}")]
    title = f"Training on {r.device} ({r.name})"
    if r.ok:
        summary = f"trains: loss {r.first_loss:.3f} → {r.last_loss:.3f} in {r.steps} steps ({r.seconds:.2f} s)"
        checks = (f"tensors copy to {r.device} and back exactly; its output matches the CPU's "
                  f"(max |difference| {r.max_difference_from_cpu:.2g}); gradients are finite; the loss fell")
        finding = Finding("smoke.passed", Level.OK, f"{r.device} trains", checks, "", name, evidence, r.device)
    else:
        why = r.error or "; ".join(r.problems)
        summary = f"does not train: {why}"
        finding = Finding(
            "smoke.failed", Level.ERROR, f"training on {r.device} failed", why,
            "run `doctor check -v` for this machine's torch, driver and GPUs; "
            "`doctor explain` reads an error message like the one above",
            name, evidence, r.device)
    return Area(name, title, summary, details, [finding])


def smoke_report(choice: str = "all", steps: int = 60, env: Mapping[str, str] | None = None) -> Report:
    torch = require_torch("smoke")
    devices, missing, status = select(torch, choice, dict(env or {}))
    results = [run_device(torch, d, steps) for d in devices]
    areas = [area_for(r) for r in results]
    for m in missing:
        areas.append(Area(f"smoke.{m.kind}", f"Training on {m.kind}", f"not available: {m.title}",
                          [m.detail], [m.finding(f"smoke.{m.kind}")]))
    facts = {"torch_version": torch.__version__, "device_status": status, "requested": choice}
    return Report("smoke", facts, areas, doctor_version=__version__,
                  extra={"smoke": [dict(asdict(r), ok=r.ok) for r in results]})
