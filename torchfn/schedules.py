"""Learning-rate schedules: plain functions of the step number (0, 1, 2, ...).

Pass one as `fit(..., lr=schedule)`, or call it yourself: `step(params, state, batch, lr=sched(i))`.
Each matches the torch.optim.lr_scheduler it is named after, step for step (tests check).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

Schedule = Callable[[int], float]


def constant(value: float) -> Schedule:
    return lambda step: value


def linear(start: float, end: float, steps: int) -> Schedule:
    """From `start` to `end` over `steps` steps, then `end` (LinearLR with factors start/base, end/base)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return lambda step: start + (end - start) * min(step, steps) / steps


def cosine(base: float, steps: int, final: float = 0.0) -> Schedule:
    """Half a cosine from `base` down to `final` over `steps` steps (CosineAnnealingLR(T_max=steps, eta_min=final))."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return lambda step: final + (base - final) * (1 + math.cos(math.pi * min(step, steps) / steps)) / 2


def warmup(schedule: Schedule, steps: int, start: float = 0.0) -> Schedule:
    """Linear from `start` to `schedule(0)` over `steps` steps, then `schedule(step - steps)`."""
    if steps < 0:
        raise ValueError(f"steps must be at least 0, got {steps}")

    def lr(step: int) -> float:
        if step < steps:
            return start + (schedule(0) - start) * step / steps
        return schedule(step - steps)

    return lr


def piecewise(boundaries: Sequence[int], values: Sequence[float]) -> Schedule:
    """values[i] from boundaries[i-1] up to boundaries[i] (MultiStepLR when values shrink by gamma)."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(f"piecewise needs one more value than boundaries, got {len(values)} and {len(boundaries)}")
    if list(boundaries) != sorted(boundaries):
        raise ValueError("piecewise boundaries must be increasing")
    return lambda step: values[bisect.bisect_right(boundaries, step)]


def one_cycle(max_lr: float, total_steps: int, *, pct_start: float = 0.3, div_factor: float = 25.0,
              final_div_factor: float = 1e4) -> Schedule:
    """OneCycleLR (cosine annealing, three_phase=False): up to max_lr, then down to max_lr/(div·final_div)."""
    if total_steps < 2:
        raise ValueError(f"total_steps must be at least 2, got {total_steps}")
    initial = max_lr / div_factor
    minimum = initial / final_div_factor
    peak = float(pct_start * total_steps) - 1

    def anneal(a: float, b: float, pct: float) -> float:
        return b + (a - b) / 2.0 * (math.cos(math.pi * pct) + 1)

    def lr(step: int) -> float:
        step = min(step, total_steps - 1)
        if step <= peak:
            return anneal(initial, max_lr, step / peak if peak > 0 else 1.0)
        return anneal(max_lr, minimum, (step - peak) / (total_steps - 1 - peak))

    return lr
