"""Gradients of pure functions, a pure training step, and a small `fit` loop.

`grad`, `value_and_grad` and `vmap` are torch.func's (composable: per-example gradients,
Hessians). `train_step` needs first-order gradients only and by default takes them with
`torch.autograd.grad` on fresh leaves instead: the same numbers, no mutation of the caller's
tensors, and about 25 % less per-op overhead than torch.func's transform layers on a small
MLP (docs/torchfn.md has the measurements). `grad="func"` selects torch.func.

torch.func's first use imports torch._dynamo, which takes seconds; the autograd path does not.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from torchfn import random
from torchfn.optim import Optimizer
from torchfn.precision import compute_dtype
from torchfn.tree import flatten, leaves, unflatten, unflatten_like

Params = Any


def grad(f: Callable[..., torch.Tensor], argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar function with respect to its params (torch.func.grad)."""
    return torch.func.grad(f, argnums=argnums, has_aux=has_aux)


def value_and_grad(f: Callable[..., torch.Tensor], argnums: int | tuple[int, ...] = 0,
                   has_aux: bool = False, *, method: str = "func") -> Callable:
    """f's value and gradient, JAX's order: `(loss, grads)` (or `((loss, aux), grads)`).

    method="func" is torch.func.grad_and_value (composes with vmap and higher orders).
    method="autograd" is first order with respect to the first argument only, and cheaper:
    no transform layers per op, and no torch._dynamo import (seconds) on the first call.
    """
    if method == "autograd":
        if argnums != 0 or has_aux:
            raise ValueError("method='autograd' supports argnums=0 without has_aux; use method='func'")
        return _autograd_value_and_grad(f)
    if method != "func":
        raise ValueError(f"method must be 'func' or 'autograd', got {method!r}")
    both = torch.func.grad_and_value(f, argnums=argnums, has_aux=has_aux)

    def value_and_grad_f(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        g, value = both(*args, **kwargs)
        return value, g

    return value_and_grad_f


vmap = torch.func.vmap


def _autograd_value_and_grad(f: Callable[..., torch.Tensor]) -> Callable:
    """(loss, grads) with torch.autograd on detached leaves: first order only, and faster.

    `detach()` makes new tensor objects sharing storage, so the caller's params never gain
    `requires_grad` or a `.grad`; the graph lives and dies inside this call. A param the
    loss does not use gets the grad None.
    """

    def value_and_grad_f(params: Params, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Params]:
        ps, spec = flatten(params)  # once: the spec rebuilds both trees
        with torch.enable_grad():
            live = [p.detach().requires_grad_() for p in ps]
            loss = f(unflatten(spec, live), *args, **kwargs)
            gs = torch.autograd.grad(loss, live, allow_unused=True)
        # None, not zeros, for a param the loss does not use: the optimizers then skip it
        # (no weight decay, no moment update), as torch.optim skips `p.grad is None`.
        return loss.detach(), unflatten(spec, list(gs))

    return value_and_grad_f


# -- torch.compile, or one clear message and eager ------------------------------------


class CompileFallbackWarning(UserWarning):
    """torch.compile could not compile the step on this machine; torchfn runs it eagerly."""


def compile_fallback_message(exc: BaseException) -> str:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    reason = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    if len(reason) > 300:
        reason = reason[:297] + "..."
    hint = "install a C++ compiler (g++ or clang++, or point CXX at one)" if "compiler" in reason.lower() \
        else "see the reason above"
    return (f"torchfn: torch.compile does not work on this machine ({reason}); running eagerly instead. "
            f"To use compile, {hint}; to silence this, pass compile=False.")


def compile_or_eager(fn: Callable, *, on_fallback: Callable[[str], None] | None = None,
                     fullgraph: bool = False) -> Callable:
    """`torch.compile(fn)` where it works; otherwise `fn` itself, after ONE message.

    Compilation happens at the first call (and again for new shapes), so failures are
    caught there: if the eager function succeeds on the same inputs, the failure was the
    compiler's, and every later call runs eagerly. If eager fails too, that error is the
    caller's and is raised as it is.
    """
    say = on_fallback or (lambda msg: warnings.warn(msg, CompileFallbackWarning, stacklevel=4))
    try:
        compiled = torch.compile(fn, fullgraph=fullgraph)
    except Exception as exc:  # e.g. torch.compile unsupported on this platform or Python
        say(compile_fallback_message(exc))
        return fn
    broken: list[BaseException] = []

    def run(*args: Any, **kwargs: Any) -> Any:
        if broken:
            return fn(*args, **kwargs)
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:
            result = fn(*args, **kwargs)
            broken.append(exc)
            say(compile_fallback_message(exc))
            return result

    run.compile_error = broken  # type: ignore[attr-defined]
    return run


# -- the step and the loop --------------------------------------------------------------


def _takes_key(fn: Callable) -> bool:
    try:
        return "key" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def train_step(loss_fn: Callable[..., torch.Tensor], optimizer: Optimizer, *, compile: bool = False,
               grad: str = "autograd", precision: str | torch.dtype | None = None) -> Callable:
    """A pure step: `step(params, opt_state, batch, lr, key=None) -> (params, opt_state, loss)`.

    `loss_fn(params, batch)` returns a scalar; if it has a `key` parameter it also gets
    the step's key (for dropout) as a 0-d int64 tensor (`torchfn.random.as_tensor_key`),
    so that the randomness is traceable. The loss comes back as a tensor so that the loop
    need not wait for the device every step.

    `compile=True` compiles the WHOLE step — loss, gradient and optimizer update — as one
    graph (`torch.compile(fullgraph=True)`): a graph break is not hidden as a partly eager
    step but reported, once, as a CompileFallbackWarning, and the step then runs eagerly.
    `lr` and the key are graph inputs, so a schedule or a new key does not recompile.

    `precision="bf16"` or `"fp16"` runs the loss under `torch.autocast` with float32 master
    params (see torchfn.precision); with `fn.dynamic_loss_scale(opt)` the loss is multiplied
    by the state's `loss_scale` before differentiation (needed for fp16).
    """
    if grad not in ("autograd", "func"):
        raise ValueError(f"grad must be 'autograd' or 'func', got {grad!r}")
    with_key = _takes_key(loss_fn)

    low = compute_dtype(precision)

    def plain_loss(params: Params, batch: Any, key: Any) -> torch.Tensor:
        return loss_fn(params, batch, key=key) if with_key else loss_fn(params, batch)

    if low is None:
        loss = plain_loss
    else:
        def loss(params: Params, batch: Any, key: Any, scale: Any = None) -> torch.Tensor:
            device_type = next((t.device.type for t in leaves(params) if isinstance(t, torch.Tensor)), "cpu")
            with torch.autocast(device_type, dtype=low):
                value = plain_loss(params, batch, key)
            value = value.float()
            return value if scale is None else value * scale

    def tensor_key(key: Any, batch: Any) -> Any:
        if key is None or not with_key:
            return None
        device = next((t.device for t in leaves(batch) if isinstance(t, torch.Tensor)), "cpu")
        return random.as_tensor_key(key, device)

    if compile and low is not None:
        raise ValueError("compile=True with precision= is not supported yet; use one of them")
    if compile:
        both = torch.func.grad_and_value(loss)

        def whole(params: Params, opt_state: Any, batch: Any, lr: Any, key: Any) -> tuple[Params, Any, torch.Tensor]:
            grads, value = both(params, batch, key)
            new_params, new_state = optimizer.step(params, grads, opt_state, lr)
            return new_params, new_state, value.detach()

        compiled = compile_or_eager(whole, fullgraph=True)

        def step(params: Params, opt_state: Any, batch: Any, lr: float,
                 key: int | None = None) -> tuple[Params, Any, torch.Tensor]:
            return compiled(params, opt_state, batch, lr, tensor_key(key, batch))

        step.compile_error = compiled.compile_error  # type: ignore[attr-defined]
        return step

    loss_and_grads = value_and_grad(loss, method=grad)

    def step(params: Params, opt_state: Any, batch: Any, lr: float,
             key: int | None = None) -> tuple[Params, Any, torch.Tensor]:
        scale = opt_state.get("loss_scale") if low is not None and isinstance(opt_state, dict) else None
        if scale is not None:
            value, grads = loss_and_grads(params, batch, tensor_key(key, batch), scale)
            value = value / scale
        else:
            value, grads = loss_and_grads(params, batch, tensor_key(key, batch))
        new_params, new_state = optimizer.step(params, grads, opt_state, lr)
        return new_params, new_state, value.detach()

    return step


def batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, key: int | None = None, *,
            drop_last: bool = False) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Minibatches of (x, y), shuffled by `key` (in order when key is None)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    n = x.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"x has {n} examples but y has {y.shape[0]}")
    order = torch.randperm(n, generator=random.generator(key)).to(x.device) if key is not None else None
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        if order is None:
            yield x[start:start + batch_size], y[start:start + batch_size]
        else:
            idx = order[start:start + batch_size]
            yield x[idx], y[idx]


@dataclass
class FitResult:
    params: Params
    opt_state: Any
    losses: list[float] = field(default_factory=list)  # mean training loss per epoch
    steps: int = 0


def fit(loss_fn: Callable[..., torch.Tensor], params: Params, optimizer: Optimizer,
        data: Callable[[int | None], Iterable[Any]] | Iterable[Any], *, epochs: int = 1,
        lr: float | Callable[[int], float] = 1e-3, key: int | None = None, compile: bool = False,
        opt_state: Any = None, on_epoch: Callable[[int, FitResult], None] | None = None) -> FitResult:
    """Train for `epochs` passes over `data` and return the new params and state.

    `data` is a function of an epoch key (`lambda k: batches(x, y, 64, k)`) or a
    re-iterable of batches. `lr` may be a schedule: a function of the step number.
    Nothing passed in is changed.
    """
    step = train_step(loss_fn, optimizer, compile=compile)
    result = FitResult(params, optimizer.init(params) if opt_state is None else opt_state)
    for epoch in range(epochs):
        epoch_key = random.fold_in(key, epoch) if key is not None else None
        data_key = random.split(epoch_key)[0] if epoch_key is not None else None
        batch_iter = data(data_key) if callable(data) else data
        total, count = None, 0
        for i, batch in enumerate(batch_iter):
            rate = lr(result.steps) if callable(lr) else lr
            step_key = random.fold_in(epoch_key, i) if epoch_key is not None else None
            result.params, result.opt_state, value = step(result.params, result.opt_state, batch, rate, step_key)
            total = value if total is None else total + value
            count += 1
            result.steps += 1
        if count == 0:
            raise ValueError("fit: the data gave no batches")
        result.losses.append(float(total) / count)  # one device sync per epoch
        if on_epoch is not None:
            on_epoch(epoch, result)
    return result
