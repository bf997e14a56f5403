"""Argument checks shared by the algorithm functions: each raises ValueError naming the argument."""

from __future__ import annotations

import math

import torch


def check_nonnegative(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")


def check_range(name: str, value: float, low: float, high: float, *, high_open: bool = False) -> None:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and low <= value
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        bracket = ")" if high_open else "]"
        raise ValueError(f"{name}={value!r} must lie in [{low}, {high}{bracket}")


def check_positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be an integer >= 1")


def check_same_shape(**tensors: torch.Tensor) -> None:
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{n}{list(s)}" for n, s in shapes.items())
        raise ValueError(f"shape mismatch: {listed} must all have the same shape")


def check_per_sample(name: str, value: float | torch.Tensor, like: torch.Tensor) -> None:
    """A per-sample argument is a Python number, a 0-d tensor, or a tensor shaped like `like`."""
    if torch.is_tensor(value) and value.dim() > 0 and tuple(value.shape) != tuple(like.shape):
        raise ValueError(f"{name}{list(value.shape)} must be a scalar or have shape {list(like.shape)}")
