"""Compute settings of a training model: weights' dtype, bf16 autocast (mixed precision), gradient checkpointing.

Agents score and train in eval mode (no dropout, so a fresh update's ratio is exactly 1). transformers only
checkpoints layers in train mode, so here a layer checkpoints whenever autograd is recording instead: during
updates, never during generation or scoring (which run without gradients and keep their KV cache).
"""

from __future__ import annotations

import functools
import types

import torch
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer

from hacrl_exp.config.schema import ModelConfig

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def prepare_model(model: PreTrainedModel, cfg: ModelConfig, device: torch.device) -> PreTrainedModel:
    """Cast to cfg.dtype, move to `device`, eval mode, and autocast to cfg.compute_dtype when set."""
    model.to(device=device, dtype=DTYPES[cfg.dtype])
    model.eval()  # no dropout: scoring and training see the same function (tiny configs have dropout 0)
    if cfg.compute_dtype is not None:
        enable_autocast(model, DTYPES[cfg.compute_dtype])
    return model


def enable_autocast(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Run every forward of `model` under torch.autocast(<its device type>, dtype), as accelerate does.

    Matmuls run in `dtype` while the weights (and AdamW's state) keep theirs: float32 weights + bfloat16 = mixed
    precision. Logits come out in `dtype`; scoring casts them to float32 before the log-softmax. Bound as a method,
    so `copy.deepcopy(model)` (the KL reference) gets its own autocast forward.
    """

    def forward(self, *args, **kwargs):
        with torch.autocast(next(self.parameters()).device.type, dtype=dtype):
            return type(self).forward(self, *args, **kwargs)

    model.forward = types.MethodType(forward, model)


def enable_gradient_checkpointing(model: torch.nn.Module) -> int:
    """Checkpoint every decoder layer whenever gradients are recorded (non-reentrant). Returns the layer count.

    transformers 5.x before 5.18 calls this gradient checkpointing (5.18 renames it activation checkpointing; the
    project pins < 5.18). Raises ValueError for a model without checkpointable layers.
    """
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # a peft model's transformers model
    if not getattr(inner, "supports_gradient_checkpointing", False):
        raise ValueError(f"{type(inner).__name__} does not support gradient checkpointing")
    inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # a forward without use_cache (scoring, updates) then builds no KV cache, which some models (GPT-2) hand to
    # their layers positionally; generate() still asks for the cache through its generation config
    inner.config.use_cache = False
    layers = [m for m in inner.modules() if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing]
    for layer in layers:
        layer.__class__ = _checkpoint_when_grad(type(layer))
    if not layers:
        raise ValueError(f"{type(inner).__name__} has no checkpointable layers")
    return len(layers)


@functools.cache
def _checkpoint_when_grad(cls: type) -> type:
    """A subclass of a GradientCheckpointingLayer that checkpoints when autograd records, in any mode.

    Mirrors transformers' own __call__ (which asks self.training): a checkpointed layer gets no KV cache, because
    the backward's recomputation would otherwise append to it a second time.
    """

    def __call__(self, *args, **kwargs):
        if self.training or not (self.gradient_checkpointing and torch.is_grad_enabled()):
            return cls.__call__(self, *args, **kwargs)
        if kwargs.get("use_cache"):
            kwargs["use_cache"] = False
        if not self._can_checkpoint_with_cache:
            for key in ("past_key_values", "layer_past"):
                if kwargs.get(key) is not None:
                    kwargs[key] = None
        return self._gradient_checkpointing_func(functools.partial(torch.nn.Module.__call__, self, **kwargs), *args)

    return type(cls.__name__, (cls,), {"__call__": __call__, "__module__": cls.__module__})
