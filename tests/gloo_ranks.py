"""Real gloo ranks for tests: W processes, one process group on 127.0.0.1 (agents.sharding's rendezvous).

The ranks are forked from the test's process (multiprocessing's "fork"), which has torch, transformers and the
package imported: a spawned rank imports them again, ~10 s of CPU each on CI's 2 cores, and the group is what these
tests check, not a new interpreter. Ranks run torch on one thread, as the test process does (no OpenMP pool crosses
the fork); a rank forms its own process group and destroys it before it ends."""

from __future__ import annotations

import socket
from collections.abc import Callable

import torch
import torch.multiprocessing as mp

START_METHOD = "fork"  # see the module's docstring


def join_cpu_group(rank: int, world: int, ports) -> socket.socket | None:
    """Form the W-rank gloo group: rank 0 opens the rendezvous socket (`store_socket`) and hands its port to the
    others through the queue `ports`. Returns rank 0's socket (whose descriptor the store now owns), None elsewhere."""
    from hacrl_exp.agents.sharding import init_rank_group, store_socket

    listening = store_socket() if rank == 0 else None
    if listening is not None:
        for _ in range(world - 1):
            ports.put(listening.getsockname()[1])
    port = listening.getsockname()[1] if listening is not None else ports.get()
    init_rank_group(rank, world, port, torch.device("cpu"), listening)
    return listening


def run_ranks(target: Callable, world: int, *args, timeout: float = 300) -> None:
    """Run target(rank, ports, *args) in `world` forked processes (`ports`: the queue `join_cpu_group` takes) and
    assert that every one exited 0."""
    ctx = mp.get_context(START_METHOD)
    ports = ctx.Queue()
    procs = [ctx.Process(target=target, args=(rank, ports, *args)) for rank in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=timeout)
    assert [proc.exitcode for proc in procs] == [0] * world
