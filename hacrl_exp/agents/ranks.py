"""How the W data-parallel ranks of one sharded agent divide a step's rows (docs/distributed.md, "How it works").

Every split here is a pure function of the row count (or the rows' token counts) and the rank, so each rank computes
every rank's share without asking the others, and the shares concatenated in rank order are the rows in their order:
what rank r computes on its share, gathered in rank order, is what W = 1 computes on the whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class RankGroup:
    """This worker's place in its agent's process group: rank of world."""

    rank: int
    world: int


ONE_RANK = RankGroup(0, 1)
"""An unsharded agent: one rank that does all the work."""


def rank_rows(count: int, ranks: RankGroup, unit: int = 1) -> range:
    """Rank r's contiguous rows of `count`, in whole units of `unit` rows: of the U = ⌈count/unit⌉ units, the units
    [⌊r·U/W⌋, ⌊(r+1)·U/W⌋). Shares differ by at most one unit; a rank may get none (U < W)."""
    units = -(-count // unit)
    low, high = units * ranks.rank // ranks.world * unit, units * (ranks.rank + 1) // ranks.world * unit
    return range(min(low, count), min(high, count))


def token_shares(rows: torch.Tensor, tokens: Sequence[int], world: int) -> list[torch.Tensor]:
    """`rows` (batch indices, in order) cut into W contiguous shares of about equal tokens, so that ranks computing
    forward and backward on them finish together: row i, with t_i tokens and T_<i before it of T in all, goes to share
    ⌊W·(2·T_<i + t_i) / 2T⌋ (its middle token's share). Integer arithmetic; every row in exactly one share."""
    counts = [int(tokens[int(r)]) for r in rows]
    total, before, share_of = max(sum(counts), 1), 0, []
    for t in counts:
        share_of.append(min(world * (2 * before + t) // (2 * total), world - 1))
        before += t
    owner = torch.tensor(share_of, dtype=torch.long)
    return [rows[owner == r] for r in range(world)]


def gather(value: Any, ranks: RankGroup) -> list[Any]:
    """[value of rank 0, …, value of rank W−1] on every rank (`all_gather_object`, a collective); [value] at W = 1."""
    if ranks.world == 1:
        return [value]
    parts: list[Any] = [None] * ranks.world
    dist.all_gather_object(parts, value)
    return parts
