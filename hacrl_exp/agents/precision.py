"""Compute settings of a training model: weights' dtype, bf16 mixed precision, gradient checkpointing.

Mixed precision (model.dtype=float32, model.compute_dtype=bfloat16) comes two ways (model.mixed_precision):
  - master (default): the model's parameters are cast to bf16, so forward and backward run on bf16 weights;
    `MasterWeightsAdamW` keeps a float32 copy of each trainable weight, accumulates the gradients into float32
    (a hook per parameter, so no bf16 gradient outlives its backward), clips and steps AdamW in float32 and
    writes the rounded weights back. This is mixed-precision training as Megatron-LM's
    Float16OptimizerWithFloat16Params, ZeRO (Rajbhandari et al. 2020, §3.1) and FSDP2's MixedPrecisionPolicy do it.
    Buffers (rotary frequencies) stay float32.
  - autocast: float32 weights under torch.autocast; every forward casts each weight to bf16 again.

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


def uses_master_weights(cfg: ModelConfig) -> bool:
    """Whether the model computes on bf16 weights with float32 masters in its optimizer (module docstring)."""
    return cfg.compute_dtype is not None and cfg.dtype == "float32" and cfg.mixed_precision == "master"


def prepare_model(model: PreTrainedModel, cfg: ModelConfig, device: torch.device) -> PreTrainedModel:
    """Cast to cfg.dtype, move to `device`, eval mode, and autocast to cfg.compute_dtype when mixed precision is
    autocast. With master weights the model stays float32 here: `make_optimizer` takes the masters, then casts."""
    model.to(device=device, dtype=DTYPES[cfg.dtype])
    model.eval()  # no dropout: scoring and training see the same function (tiny configs have dropout 0)
    if cfg.compute_dtype is not None and not uses_master_weights(cfg):
        enable_autocast(model, DTYPES[cfg.compute_dtype])
    return model


def cast_parameters(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Cast every floating parameter of `model` to `dtype` in place (the same Parameter objects); buffers keep
    their dtype, as under FSDP2's MixedPrecisionPolicy."""
    for param in model.parameters():
        if param.is_floating_point():
            param.data = param.data.to(dtype)


def make_optimizer(model: torch.nn.Module, cfg: ModelConfig, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over the trainable weights; with master weights, `MasterWeightsAdamW` over float32 copies of them,
    taken before the model's parameters are cast to cfg.compute_dtype."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    # fused (one kernel, no temporaries) on CUDA; CPU keeps torch's default (the default run's digits)
    options = {"lr": lr, "weight_decay": weight_decay, **({"fused": True} if _on_cuda(trainable) else {})}
    if not uses_master_weights(cfg):
        return torch.optim.AdamW(trainable, **options)
    masters = [p.detach().float().clone() for p in trainable]
    cast_parameters(model, DTYPES[cfg.compute_dtype])
    return MasterWeightsAdamW(trainable, masters, **options)


def _on_cuda(params: list[torch.Tensor]) -> bool:
    return bool(params) and all(p.device.type == "cuda" for p in params)


class MasterWeightsAdamW(torch.optim.AdamW):
    """AdamW on float32 master copies of low-precision model weights.

    Each model weight's gradient is added into its master's float32 gradient as soon as autograd has accumulated it
    (`register_post_accumulate_grad_hook`), and the low-precision gradient is freed; `param_groups` hold the
    masters, so gradient clipping over them (trainer.step) sees float32 gradients. `step` steps AdamW on the masters,
    then copies them, rounded, into the model's weights. `state_dict` carries the masters, so a resumed agent
    continues from the float32 values, not from the bf16 weights a checkpoint's model files hold."""

    def __init__(self, params: list[torch.nn.Parameter], masters: list[torch.Tensor], **kwargs) -> None:
        self.model_params = list(params)
        super().__init__(masters, **kwargs)
        self.hooks = [
            p.register_post_accumulate_grad_hook(functools.partial(_accumulate_into, m))
            for p, m in zip(self.model_params, masters)
        ]

    @property
    def masters(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        torch._foreach_copy_(self.model_params, self.masters)
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        for p in self.model_params:
            p.grad = None

    def state_dict(self) -> dict:
        return {**super().state_dict(), "master_weights": [m.detach().clone() for m in self.masters]}

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        masters = state_dict.pop("master_weights")
        super().load_state_dict(state_dict)
        with torch.no_grad():
            torch._foreach_copy_(self.masters, [m.to(self.masters[0].device) for m in masters])
            torch._foreach_copy_(self.model_params, self.masters)

    def release(self) -> list[torch.Tensor]:
        """Remove the gradient hooks and return the masters (an agent being sharded takes them back as weights)."""
        for hook in self.hooks:
            hook.remove()
        self.hooks = []
        return self.masters


def _accumulate_into(master: torch.Tensor, param: torch.Tensor) -> None:
    if master.grad is None:
        master.grad = param.grad.float()
    else:
        master.grad.add_(param.grad)
    param.grad = None


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
