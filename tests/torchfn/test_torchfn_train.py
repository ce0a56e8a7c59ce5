"""train_step and fit: pure, deterministic, learning; torch.compile used or cleanly refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import torchfn as fn

REPO = Path(__file__).resolve().parents[2]
SIZES = [8, 16, 12, 3]  # as in conftest.py


def _loss(model):
    def loss(params, batch, key=None):
        x, y = batch
        return fn.cross_entropy(model(params, x, key=key), y)

    return loss


def _equal_trees(a, b) -> bool:
    la, lb = fn.leaves(a), fn.leaves(b)
    return len(la) == len(lb) and all(torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v
                                      for u, v in zip(la, lb))


def _clone(tree):
    return fn.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


@pytest.mark.parametrize("grad", ["autograd", "func"])
def test_train_step_is_pure_and_deterministic(data, grad):
    model = fn.mlp(SIZES, dropout_p=0.2)
    opt = fn.adam()
    step = fn.train_step(_loss(model), opt, grad=grad)
    params = model.init(fn.key(0))
    state = opt.init(params)
    params, state, _ = step(params, state, data, 1e-2, fn.key(1))
    before = (_clone(params), _clone(state), _clone(data))

    out1 = step(params, state, data, 1e-2, fn.key(2))
    out2 = step(params, state, data, 1e-2, fn.key(2))
    out3 = step(params, state, data, 1e-2, fn.key(3))

    assert _equal_trees(before, (params, state, data)), "train_step changed its inputs"
    assert not any(t.requires_grad for t in fn.leaves(params)), "the caller's params gained requires_grad"
    assert _equal_trees(out1, out2), "same inputs and key, different outputs"
    assert not torch.equal(out1[2], out3[2]), "the key did not reach dropout"


def test_both_gradient_methods_agree(data):
    model = fn.mlp(SIZES)
    params = model.init(fn.key(0))
    loss = lambda p: _loss(model)(p, data)  # noqa: E731
    v1, g1 = fn.value_and_grad(loss)(params)
    v2, g2 = fn.value_and_grad(loss, method="autograd")(params)
    assert torch.allclose(v1, v2)
    assert all(torch.allclose(a, b, atol=1e-7) for a, b in zip(fn.leaves(g1), fn.leaves(g2)))
    with pytest.raises(ValueError, match="method='autograd' supports argnums=0"):
        fn.value_and_grad(loss, has_aux=True, method="autograd")


def test_fit_learns_leaves_its_inputs_and_repeats_exactly(data):
    x, y = data
    model = fn.mlp(SIZES)
    params = model.init(fn.key(0))
    before = _clone(params)
    rates = []

    def schedule(step: int) -> float:
        rates.append(step)
        return 1e-2

    run = lambda: fn.fit(_loss(model), params, fn.adam(), lambda k: fn.batches(x, y, 8, k),  # noqa: E731
                         epochs=15, lr=schedule, key=fn.key(5))
    a, b = run(), run()
    assert _equal_trees(before, params)
    assert a.steps == 15 * 4 and rates[:4] == [0, 1, 2, 3]
    assert a.losses[-1] < 0.5 * a.losses[0]
    assert a.losses == b.losses and _equal_trees(a.params, b.params)


def test_batches_shuffle_by_key_and_cover_every_example():
    x = torch.arange(10.0).unsqueeze(1)
    y = torch.arange(10)
    ordered = [int(v) for _, yb in fn.batches(x, y, 4) for v in yb]
    assert ordered == list(range(10))
    shuffled = [int(v) for _, yb in fn.batches(x, y, 4, fn.key(1)) for v in yb]
    assert sorted(shuffled) == list(range(10)) and shuffled != ordered
    assert shuffled == [int(v) for _, yb in fn.batches(x, y, 4, fn.key(1)) for v in yb]
    assert [len(yb) for _, yb in fn.batches(x, y, 4, drop_last=True)] == [4, 4]
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        next(fn.batches(x, y, 0))


def test_compile_true_compiles_here_and_matches_eager(data):
    # g++ is part of this project's test set-up: if torch.compile fails here, that is a failure.
    model = fn.mlp(SIZES)
    opt = fn.sgd()
    params = model.init(fn.key(0))
    eager = fn.train_step(_loss(model), opt)
    compiled = fn.train_step(_loss(model), opt, compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fn.CompileFallbackWarning)
        pc, sc, lc = compiled(params, opt.init(params), data, 0.1)
        pc, sc, lc = compiled(pc, sc, data, 0.1)
    pe, se, le = eager(params, opt.init(params), data, 0.1)
    pe, se, le = eager(pe, se, data, 0.1)
    assert torch.allclose(lc, le, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(fn.leaves(pc), fn.leaves(pe)))


@pytest.mark.slow
def test_compile_true_with_dropout_keys_compiles_the_whole_step(data):
    # Regression: a dropout key made a torch.Generator inside the compiled region, which
    # broke the graph, and the step silently ran (partly) eagerly. Now the whole step is one
    # fullgraph compile — a break would raise and show up as a CompileFallbackWarning here.
    model = fn.mlp(SIZES, dropout_p=0.3)
    opt = fn.momentum(0.9)
    params = model.init(fn.key(0))
    compiled = fn.train_step(_loss(model), opt, compile=True)
    eager = fn.train_step(_loss(model), opt)
    pc, sc = params, opt.init(params)
    pe, se = params, opt.init(params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fn.CompileFallbackWarning)
        for i in range(3):
            pc, sc, lc = compiled(pc, sc, data, 0.05, fn.key(i))
            pe, se, le = eager(pe, se, data, 0.05, fn.key(i))
            assert torch.allclose(lc, le, atol=1e-5), (i, lc, le)
    assert compiled.compile_error == []
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(fn.leaves(pc), fn.leaves(pe)))
    # The key reached dropout inside the graph: another key, another loss.
    _, _, other = compiled(params, opt.init(params), data, 0.05, fn.key(99))
    _, _, first = compiled(params, opt.init(params), data, 0.05, fn.key(0))
    assert not torch.equal(other, first)


FALLBACK_SCRIPT = textwrap.dedent("""
    import torch, torchfn as fn
    model = fn.mlp([4, 8, 2])
    x, y = torch.randn(16, 4, generator=torch.Generator().manual_seed(0)), torch.arange(16) % 2
    loss = lambda p, b: fn.cross_entropy(model(p, b[0]), b[1])
    opt = fn.sgd()
    for name, compile in (("compiled", True), ("eager", False)):
        step = fn.train_step(loss, opt, compile=compile)
        params, state = model.init(fn.key(0)), opt.init(model.init(fn.key(0)))
        for _ in range(3):
            params, state, value = step(params, state, (x, y), 0.1)
        print(name, repr(float(value)))
""")


def test_compile_falls_back_with_one_clear_message_when_no_compiler_works(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), CXX=str(tmp_path / "no-such-g++"),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))  # no cached kernel may hide the failure
    proc = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    losses = dict(line.split() for line in proc.stdout.splitlines())
    assert losses["compiled"] == losses["eager"]
    assert proc.stderr.count("torch.compile does not work on this machine") == 1, proc.stderr
    assert "install a C++ compiler" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_digits_example_reaches_95_percent():
    proc = subprocess.run([sys.executable, str(REPO / "examples/digits.py")], capture_output=True, text=True,
                          timeout=300)
    m = re.search(r"test accuracy: ([\d.]+)%", proc.stdout)
    assert m, proc.stdout + proc.stderr
    assert float(m.group(1)) >= 95.0 and proc.returncode == 0
