"""Step time of torchfn against nn.Module + torch.optim: the 512-256-128-2 MLP at batch 64, and a small CNN.

    python benchmarks/torchfn_step.py [--model mlp|cnn|both] [--optimizer adam|sgd] [--compile]
                                      [--repeats 41] [--steps 25] [--threads N]

Prints the median time per training step of each, measured in interleaved rounds so that
a machine's drift hits both alike, and the ratio torchfn / torch.optim (target ≤ 1.10).
With --compile, torchfn's `compile=True` step (the whole step as one graph) is timed in the
same rounds and reported beside them. The last line per model is JSON for scripts.
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
CNN = "conv(1→8,3)-relu-conv(8→16,3)-relu-flatten-linear(2304→10) on 1x16x16"


def _models(kind: str, batch: int):
    """(nn.Module, torchfn model, x, y) for the same architecture."""
    gen = torch.Generator().manual_seed(0)
    if kind == "mlp":
        x = torch.randn(batch, SIZES[0], generator=gen)
        y = torch.randint(0, SIZES[-1], (batch,), generator=gen)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(SIZES) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers), fn.mlp(SIZES), x, y
    x = torch.randn(batch, 1, 16, 16, generator=gen)
    y = torch.randint(0, 10, (batch,), generator=gen)
    module = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Conv2d(8, 16, 3), nn.ReLU(), nn.Flatten(),
                           nn.Linear(16 * 12 * 12, 10))
    model = fn.sequential(fn.conv2d(1, 8, 3), fn.relu, fn.conv2d(8, 16, 3), fn.relu, fn.flatten(),
                          fn.linear(16 * 12 * 12, 10))
    return module, model, x, y


def make_steps(optimizer: str, batch: int, grad: str = "autograd", checks: bool = True, kind: str = "mlp",
               compiled: bool = False):
    module, model, x, y = _models(kind, batch)
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

    def make(compile: bool):
        state = {"params": fn.from_state_dict(module.state_dict(), like=model.init(0))}
        state["opt"] = opt.init(state["params"])
        step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt, grad=grad, compile=compile)

        def torchfn_step():
            with fn.checks(checks):
                state["params"], state["opt"], loss = step(state["params"], state["opt"], (x, y), lr)
            return loss

        return torchfn_step

    steps = {"module": module_step, "torchfn": make(False)}
    if compiled:
        steps["compiled"] = make(True)
    return steps


def time_per_step(f, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        f()
    return (time.perf_counter() - start) / steps


def measure(optimizer: str = "adam", batch: int = 64, repeats: int = 41, steps: int = 25,
            grad: str = "autograd", checks: bool = True, kind: str = "mlp", compiled: bool = False) -> dict:
    fs = make_steps(optimizer, batch, grad, checks, kind, compiled)
    for f in fs.values():  # warm up allocator caches and lazy init (and compile: a few steps, new step counts)
        time_per_step(f, max(steps // 4, 10))
    times: dict[str, list[float]] = {name: [] for name in fs}
    names = list(fs)
    for i in range(repeats):
        # Short rounds in rotating order: a burst of load from elsewhere lands in a few
        # rounds of each, and the median drops it.
        for name in names[i % len(names):] + names[:i % len(names)]:
            times[name].append(time_per_step(fs[name], steps))
    med = {k: statistics.median(v) for k, v in times.items()}
    # The ratio of medians; the quartiles of per-round ratios show how noisy the machine was.
    rounds = [t / m for t, m in zip(times["torchfn"], times["module"])]
    result = {
        "model": kind, "optimizer": optimizer, "batch": batch, "grad": grad, "checks": checks, "repeats": repeats,
        "steps": steps, "threads": torch.get_num_threads(), "torch": torch.__version__,
        "module_us": round(med["module"] * 1e6, 1), "torchfn_us": round(med["torchfn"] * 1e6, 1),
        "ratio": round(med["torchfn"] / med["module"], 3),
        "round_ratio_quartiles": [round(q, 3) for q in statistics.quantiles(rounds, n=4)],
    }
    if compiled:
        result["compiled_us"] = round(med["compiled"] * 1e6, 1)
        result["compiled_ratio"] = round(med["compiled"] / med["module"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "cnn", "both"], default="both")
    ap.add_argument("--compile", action="store_true", help="also time torchfn's compile=True step")
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
    kinds = ["mlp", "cnn"] if args.model == "both" else [args.model]
    for kind in kinds:
        batch = args.batch if kind == "mlp" else args.batch // 2
        r = measure(args.optimizer, batch, args.repeats, args.steps, args.grad, not args.no_checks, kind,
                    args.compile)
        what = f"MLP {'-'.join(map(str, SIZES))}" if kind == "mlp" else f"CNN {CNN}"
        print(f"{what}, batch {r['batch']}, {r['optimizer']}, torch {r['torch']}, "
              f"{r['threads']} threads, median of {r['repeats']} rounds x {r['steps']} steps")
        print(f"  nn.Module + torch.optim : {r['module_us']:8.1f} µs/step")
        print(f"  torchfn ({r['grad']}{'' if r['checks'] else ', no checks'}){' ' * (7 - len(r['grad']))}: "
              f"{r['torchfn_us']:8.1f} µs/step")
        if "compiled_us" in r:
            print(f"  torchfn compile=True    : {r['compiled_us']:8.1f} µs/step "
                  f"(ratio {r['compiled_ratio']:.3f}, reported, no target)")
        verdict = "within" if r["ratio"] <= 1.10 else "ABOVE"
        print(f"  ratio torchfn / torch.optim = {r['ratio']:.3f} ({verdict} the 1.10 target); "
              f"per-round quartiles {r['round_ratio_quartiles']}")
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
