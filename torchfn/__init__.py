"""torchfn: training as Hasktorch does it — models are data plus pure functions.

    import torchfn as fn
    model = fn.mlp([64, 128, 10])
    params = model.init(fn.key(0))                     # a nested dict of tensors
    opt = fn.adam()
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    params, state, loss = step(params, opt.init(params), (x, y), lr=1e-3)

Needs torch (`pip install 'torch-doctor[torch]'`). See docs/torchfn.md.
"""

from __future__ import annotations

import torch.nn.functional as _F

from torchfn.contracts import ContractError, checks, checks_enabled, contract
from torchfn.io import from_state_dict, load, save, to_state_dict
from torchfn.nn import (
    Layer,
    activation,
    conv2d,
    dropout,
    flatten,
    gelu,
    layernorm,
    linear,
    mlp,
    relu,
    sequential,
    tanh,
    to_device,
)
from torchfn.optim import Optimizer, adam, adamw, momentum, sgd
from torchfn.random import fold_in, generator, key, split
from torchfn.train import (
    CompileFallbackWarning,
    FitResult,
    batches,
    compile_or_eager,
    fit,
    grad,
    train_step,
    value_and_grad,
    vmap,
)
from torchfn import schedules
from torchfn.precision import dynamic_loss_scale
from torchfn.layers import (
    BatchNorm,
    adaptive_avg_pool2d,
    adaptive_max_pool2d,
    avg_pool2d,
    batchnorm,
    branches,
    embedding,
    max_pool2d,
    multi_head_attention,
    residual,
    rmsnorm,
    summary,
)
from torchfn.transforms import (
    Transform,
    accumulate,
    add_decayed_weights,
    chain,
    clip_by_global_norm,
    clip_by_value,
    ema,
    no_decay_on_bias,
)
from torchfn.tree import check_same_structure, leaves, register_dataclass, tree_map

__version__ = "0.1.0"

cross_entropy = _F.cross_entropy
mse = _F.mse_loss

__all__ = [
    "dynamic_loss_scale",
    "BatchNorm", "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "batchnorm", "embedding",
    "max_pool2d", "multi_head_attention", "branches", "residual", "rmsnorm", "summary",
    "Transform", "accumulate", "add_decayed_weights", "chain", "clip_by_global_norm", "clip_by_value", "ema",
    "no_decay_on_bias", "parallel", "schedules",
    "CompileFallbackWarning", "ContractError", "FitResult", "Layer", "Optimizer", "activation", "adam", "adamw",
    "batches", "check_same_structure", "checks", "checks_enabled", "compile_or_eager", "contract", "conv2d", "cross_entropy", "dropout",
    "fit", "flatten", "fold_in", "from_state_dict", "gelu", "generator", "grad", "key", "layernorm", "leaves",
    "linear", "load", "mlp", "momentum", "mse", "register_dataclass", "relu", "save", "sequential", "sgd", "split", "tanh",
    "to_device", "to_state_dict", "train_step", "tree_map", "value_and_grad", "vmap",
]


def __getattr__(name: str):
    # torchfn.parallel on first use: importing it here would make `python -m torchfn.parallel`
    # (what torchrun runs) find the module already imported, and Python warns about that.
    if name == "parallel":
        import importlib

        return importlib.import_module("torchfn.parallel")
    raise AttributeError(f"module 'torchfn' has no attribute {name!r}")
