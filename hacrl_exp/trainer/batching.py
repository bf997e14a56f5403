"""Micro-batches of an update: in schedule order, or length-bucketed so that rows of similar length share one.

A micro-batch is right-padded to its longest row (agents.logprobs), so rows of mixed lengths waste the padding's
compute. Bucketing sorts the rows of a mini-batch by length (prompt + response) before cutting them into
micro-batches of `micro_batch_size`: each micro-batch then pads to a length close to its rows'. The update is the
same sum of the same per-row terms (each row's loss is divided by the whole mini-batch, trainer.step), so only the
order of float additions changes; it is on where that is free (CUDA, whose kernels do not promise a fixed
summation order anyway) and off on CPU, where the default run's digits are kept (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hacrl_exp.rollout.base import compute_device


def length_bucketed(model: torch.nn.Module) -> bool:
    """Whether an update of `model` buckets its micro-batches by length: on CUDA."""
    return compute_device(model).type == "cuda"


def micro_batches(rows: torch.Tensor, lengths: Sequence[int], size: int, bucket: bool) -> list[torch.Tensor]:
    """`rows` (indices into the batch) cut into micro-batches of at most `size`; with `bucket`, sorted by
    `lengths[row]` first (a stable sort: equal lengths keep their order). Every row appears exactly once."""
    if not len(rows):
        return []
    if bucket:
        order = sorted(range(len(rows)), key=lambda i: lengths[int(rows[i])])
        rows = rows[torch.tensor(order, dtype=torch.long)]
    return list(rows.split(size))
