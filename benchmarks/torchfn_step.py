"""Step time of torchfn against nn.Module + torch.optim: the 512-256-128-2 MLP at batch 64.

    python benchmarks/torchfn_step.py [--optimizer adam|sgd] [--repeats 41] [--steps 25] [--threads N]

Prints the median time per training step of each, measured in interleaved rounds so that
a machine's drift hits both alike, and the ratio torchfn / torch.optim (target ≤ 1.10).
The last line is JSON for scripts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import torchfn as fn  # noqa: E402

SIZES = [512, 256, 128, 2]


def make_steps(optimizer: str, batch: int, grad: str = "autograd", checks: bool = True):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, SIZES[0], generator=gen)
    y = torch.randint(0, SIZES[-1], (batch,), generator=gen)

    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(nn.ReLU())
    module = nn.Sequential(*layers)
    if optimizer == "adam":
        torch_opt = torch.optim.Adam(module.parameters(), lr=1e-3)
        opt = fn.adam()
    else:
        torch_opt = torch.optim.SGD(module.parameters(), lr=1e-2)
        opt = fn.sgd()
    lr = torch_opt.param_groups[0]["lr"]

    def module_step():
        torch_opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(module(x), y)
        loss.backward()
        torch_opt.step()
        return loss

    model = fn.mlp(SIZES)
    state = {"params": fn.from_state_dict(module.state_dict(), like=model.init(0))}
    state["opt"] = opt.init(state["params"])
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt, grad=grad)

    def torchfn_step():
        with fn.checks(checks):
            state["params"], state["opt"], loss = step(state["params"], state["opt"], (x, y), lr)
        return loss

    return module_step, torchfn_step


def time_per_step(f, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        f()
    return (time.perf_counter() - start) / steps


def measure(optimizer: str = "adam", batch: int = 64, repeats: int = 41, steps: int = 25,
            grad: str = "autograd", checks: bool = True) -> dict:
    module_step, torchfn_step = make_steps(optimizer, batch, grad, checks)
    for f in (module_step, torchfn_step):  # warm up allocator caches and lazy init
        time_per_step(f, max(steps // 4, 10))
    times: dict[str, list[float]] = {"module": [], "torchfn": []}
    for i in range(repeats):
        # Short rounds in alternating order: a burst of load from elsewhere lands in a few
        # rounds of both, and the median drops it.
        order = ("module", "torchfn") if i % 2 == 0 else ("torchfn", "module")
        for name in order:
            times[name].append(time_per_step(module_step if name == "module" else torchfn_step, steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    # The ratio of medians; the quartiles of per-round ratios show how noisy the machine was.
    rounds = [t / m for t, m in zip(times["torchfn"], times["module"])]
    return {
        "optimizer": optimizer, "batch": batch, "grad": grad, "checks": checks, "repeats": repeats, "steps": steps,
        "threads": torch.get_num_threads(), "torch": torch.__version__,
        "module_us": round(med["module"] * 1e6, 1), "torchfn_us": round(med["torchfn"] * 1e6, 1),
        "ratio": round(med["torchfn"] / med["module"], 3),
        "round_ratio_quartiles": [round(q, 3) for q in statistics.quantiles(rounds, n=4)],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=41)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--grad", choices=["autograd", "func"], default="autograd")
    ap.add_argument("--no-checks", action="store_true", help="turn torchfn's shape contracts off")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (default: torch's own)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    r = measure(args.optimizer, args.batch, args.repeats, args.steps, args.grad, not args.no_checks)
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {r['batch']}, {r['optimizer']}, torch {r['torch']}, "
          f"{r['threads']} threads, median of {r['repeats']} rounds x {r['steps']} steps")
    print(f"  nn.Module + torch.optim : {r['module_us']:8.1f} µs/step")
    print(f"  torchfn ({r['grad']}{'' if r['checks'] else ', no checks'}){' ' * (7 - len(r['grad']))}: "
          f"{r['torchfn_us']:8.1f} µs/step")
    verdict = "within" if r["ratio"] <= 1.10 else "ABOVE"
    print(f"  ratio torchfn / torch.optim = {r['ratio']:.3f} ({verdict} the 1.10 target)")
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
