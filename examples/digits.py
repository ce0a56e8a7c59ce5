"""Train an MLP on scikit-learn's digits (8x8 images, shipped with scikit-learn) with torchfn.

    python examples/digits.py [--epochs 30] [--compile] [--threads 1]

Prints the test accuracy (≥ 95 % expected, in a few seconds on a CPU) and exits 1 below it.
Everything is explicit: the key that initialises the model, the key that shuffles each
epoch, the params and optimizer state that go in and come out of every step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import torchfn as fn  # noqa: E402

TARGET = 0.95


def load(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    images, labels = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(images, labels, test_size=0.25, random_state=seed,
                                                        stratify=labels)
    # Pixels are 0..16; scale with the training set's statistics only.
    mean, std = x_train.mean(), x_train.std()
    as_x = lambda a: torch.tensor((a - mean) / std, dtype=torch.float32)  # noqa: E731
    as_y = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return as_x(x_train), as_y(y_train), as_x(x_test), as_y(y_test)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true", help="compile the step with torch.compile where it works")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (default 1: a model this small gains nothing from more, and on a busy "
                         "machine OpenMP's waiting threads make it many times slower)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    start = time.perf_counter()
    x_train, y_train, x_test, y_test = load(args.seed)
    model = fn.mlp([64, 128, 64, 10], dropout_p=0.1)
    root = fn.key(args.seed)
    init_key, train_key = fn.split(root)
    params = model.init(init_key)

    def loss(params, batch, key=None):
        x, y = batch
        return fn.cross_entropy(model(params, x, key=key), y)

    result = fn.fit(
        loss, params, fn.adamw(weight_decay=1e-4), lambda k: fn.batches(x_train, y_train, args.batch, k),
        epochs=args.epochs, lr=args.lr, key=train_key, compile=args.compile,
    )
    with torch.no_grad():
        predicted = model(result.params, x_test).argmax(dim=-1)  # key=None: dropout off
    accuracy = (predicted == y_test).float().mean().item()
    seconds = time.perf_counter() - start
    print(f"digits: {len(x_train)} train / {len(x_test)} test images, {args.epochs} epochs, {result.steps} steps, "
          f"final train loss {result.losses[-1]:.4f}")
    print(f"test accuracy: {accuracy:.2%} in {seconds:.1f} s (target ≥ {TARGET:.0%})")
    return 0 if accuracy >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
