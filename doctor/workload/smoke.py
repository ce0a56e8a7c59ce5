"""`doctor smoke`: prove that a machine really trains, on each device, with torchfn.

On every device: a tensor goes there and back bit-exactly, a small MLP gives the same
output there as on the CPU, its gradients are finite, and N Adam steps make the loss
fall as far as the same N steps do in float64 on the CPU (so the criterion is right at any
step count, 1 or 60). One verdict per device. It also times one training step of a wider
model with the process's thread setting against one thread: more threads being slower is
oversubscription, reported with the measured cost. torch is imported inside the functions only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, field
from typing import Any

from doctor import __version__
from doctor.model import Area, Evidence, Finding, Level, Report
from doctor.record import record
from doctor.workload import first_line, require_torch
from doctor.workload.devices import device_name, select, synchronizer

SIZES = [16, 32, 4]
EXAMPLES = 256
LEARNING_RATE = 1e-2
MAX_CPU_DIFFERENCE = 1e-3  # float32 on two backends; TF32 or a different GEMM order stays well inside
# The device's loss must fall at least this share of what the float64 CPU reference falls in as
# many steps: float32 or TF32 rounding changes the trajectory by far less, a broken device by more.
MIN_SHARE_OF_REFERENCE_FALL = 0.5
THREAD_SIZES = [256, 512, 512, 10]  # wide enough that threads should help, if they are set right
THREAD_BATCH = 128


@record
class SmokeResult:
    device: str
    name: str
    steps: int
    first_loss: float | None = None
    last_loss: float | None = None
    grads_finite: bool | None = None
    round_trip_exact: bool | None = None
    max_difference_from_cpu: float | None = None
    reference_last_loss: float | None = None  # the float64 CPU run of the same steps
    threads: int | None = None  # torch.get_num_threads() as the process has it
    step_ms_threads: float | None = None  # one step of the wider model with that setting
    step_ms_one_thread: float | None = None
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and not self.error


def _problem(torch: Any, seed: int) -> tuple[Any, Any, Any, Any]:
    """The fixed task: (model, params, x, y) on the CPU, from the seed alone."""
    import torchfn as fn

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(EXAMPLES, SIZES[0], generator=g)
    teacher = torch.randn(SIZES[0], SIZES[-1], generator=g)
    y = (x @ teacher).argmax(dim=1)
    model = fn.mlp(SIZES)
    return model, model.init(fn.key(seed)), x, y


def _train(torch: Any, model: Any, params: Any, x: Any, y: Any, steps: int, lr: float) -> tuple[float, float]:
    import torchfn as fn

    def loss_fn(p: Any, batch: tuple[Any, Any]) -> Any:
        return fn.cross_entropy(model(p, batch[0]), batch[1])

    opt = fn.adam()
    state = opt.init(params)
    step = fn.train_step(loss_fn, opt)
    first = loss_fn(params, (x, y))
    for _ in range(steps):
        params, state, _ = step(params, state, (x, y), lr)
    return float(first), float(loss_fn(params, (x, y)))  # the loss AFTER the last step (a step reports the one before)


def reference_losses(torch: Any, steps: int, seed: int = 0, lr: float = LEARNING_RATE) -> tuple[float, float]:
    """(first, last) loss of the same training in float64 on the CPU: what a healthy device reaches."""
    import torchfn as fn

    model, params, x, y = _problem(torch, seed)
    return _train(torch, model, fn.to_device(params, "cpu", torch.float64), x.double(), y, steps, lr)


def thread_step_times(torch: Any, repeats: int = 5) -> tuple[int, float, float]:
    """(threads, ms per step with the process's setting, ms per step on one thread): medians."""
    import statistics

    import torchfn as fn

    threads = torch.get_num_threads()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(THREAD_BATCH, THREAD_SIZES[0], generator=g)
    y = torch.randint(0, THREAD_SIZES[-1], (THREAD_BATCH,), generator=g)
    model = fn.mlp(THREAD_SIZES)
    opt = fn.sgd()
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    params = model.init(fn.key(0))

    def ms(n: int) -> float:
        torch.set_num_threads(n)
        step(params, {}, (x, y), 1e-3)  # warm
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step(params, {}, (x, y), 1e-3)
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    try:
        with fn.checks(False):
            # Interleaved, so that a burst of load elsewhere hits both settings alike.
            many, one = [], []
            for _ in range(3):
                many.append(ms(threads))
                one.append(ms(1))
    finally:
        torch.set_num_threads(threads)
    return threads, round(statistics.median(many), 3), round(statistics.median(one), 3)


def run_device(torch: Any, device: str, steps: int = 60, seed: int = 0, lr: float = LEARNING_RATE,
               check_threads: bool | None = None) -> SmokeResult:
    """Train the smoke MLP on `device`; never raises (an exception becomes `error`).

    `check_threads` (default: on the CPU) also times the thread setting against one thread.
    """
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
        model, params_cpu, x_cpu, y_cpu = _problem(torch, seed)

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

        _, grads = fn.value_and_grad(loss_fn, method="autograd")(params, (x, y))
        result.grads_finite = bool(torch.stack([torch.isfinite(t).all() for t in fn.leaves(grads)]).all())
        result.first_loss, result.last_loss = _train(torch, model, params, x, y, steps, lr)
        sync()
        result.reference_last_loss = reference_losses(torch, steps, seed, lr)[1]
    except Exception as exc:  # the device's own error is the finding (no kernel image, OOM, ...)
        result.error = first_line(exc)
    finally:
        torch.set_num_threads(threads)
    if check_threads if check_threads is not None else device == "cpu":
        try:
            result.threads, result.step_ms_threads, result.step_ms_one_thread = thread_step_times(torch)
        except Exception as exc:  # timing is advice; it must not hide the training verdict
            result.problems.append(f"timing the thread setting failed: {first_line(exc)}")
    result.seconds = round(time.perf_counter() - start, 3)
    result.problems = result.problems + _problems(result)
    return result


def oversubscribed(r: SmokeResult, tolerance: float = 1.2) -> bool:
    """More threads made the step slower than one thread (beyond noise)."""
    return (r.threads is not None and r.threads > 1 and r.step_ms_threads is not None
            and r.step_ms_one_thread is not None and r.step_ms_threads > tolerance * r.step_ms_one_thread)


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
        elif r.reference_last_loss is not None:
            want = r.first_loss - MIN_SHARE_OF_REFERENCE_FALL * (r.first_loss - r.reference_last_loss)
            if not r.last_loss <= want:
                out.append(f"the loss did not fall: {r.first_loss:.4f} → {r.last_loss:.4f} in {r.steps} steps "
                           f"(the same steps in float64 on the CPU reach {r.reference_last_loss:.4f})")
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
        ref = f" (float64 CPU reference: {r.reference_last_loss:.4f})" if r.reference_last_loss is not None else ""
        details.append(f"loss {r.first_loss:.4f} → {r.last_loss:.4f}{ref}")
    if r.step_ms_threads is not None:
        verdict = ("SLOWER than one thread: oversubscribed — set OMP_NUM_THREADS / torch.set_num_threads "
                   "to the CPUs this process really has" if oversubscribed(r) else "fine")
        details.append(f"threads: one step of MLP {'-'.join(map(str, THREAD_SIZES))} takes {r.step_ms_threads:.2f} ms "
                       f"on {r.threads} threads, {r.step_ms_one_thread:.2f} ms on 1 thread ({verdict})")
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
