"""`python -m hacrl_exp.plan [overrides]`: will this config fit these GPUs? Memory per agent and a placement.

    python -m hacrl_exp.plan experiment=paper_qwen3_4b_8b cluster.gpus=8 cluster.gpu_memory_gb=80

The overrides compose exactly as for `python -m hacrl_exp.run`; nothing loads but each model's config.json (a
local file or the planner's built-in table). Prints a table per agent, both placements (agents.memory_plan:
disjoint, each agent its own GPUs; shared, every agent on all of them, one awake at a time) with a step's order of
calls, which one executor.placement takes and why, and each agent's layout, `qwen3_8b: W=4 = 2 data-parallel × 2
tensor-parallel` (rollout.tensor_parallel: GPUs per vLLM engine; rollout.vllm.Layout), exit code 0 when the chosen
placement fits; otherwise one line with both reasons (the per-GPU bytes) and the smallest changes that would make
the disjoint one fit, exit code 2.
"""

from __future__ import annotations

import sys
from functools import partial

from rich.console import Console
from rich.table import Table

from hacrl_exp.agents.logprobs import chunk_rows
from hacrl_exp.agents.memory_plan import GIB, AgentMemory, Plan, SharedPlan, choose_placement, plan, plan_shared
from hacrl_exp.algo import ALGORITHMS
from hacrl_exp.config.schema import Config
from hacrl_exp.errors import ConfigError, exit_on_bad_input
from hacrl_exp.rollout.vllm import Layout
from hacrl_exp.trainer.validate import preflight


def cluster_size(config: Config) -> tuple[int, float]:
    """(GPUs, GiB each) from cluster.*, null values read from this machine's visible GPUs."""
    gpus, memory = config.cluster.gpus, config.cluster.gpu_memory_gb
    if gpus is None or memory is None:
        import torch

        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if visible == 0:
            raise ConfigError(
                "cluster.gpus / cluster.gpu_memory_gb are null and no GPU is visible; give the cluster to plan for, "
                "e.g. cluster.gpus=8 cluster.gpu_memory_gb=80"
            )
        gpus = visible if gpus is None else gpus
        smallest = min(torch.cuda.get_device_properties(i).total_memory for i in range(visible))
        memory = smallest / GIB if memory is None else memory
    return gpus, memory


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f}"


def agent_table(mem: AgentMemory) -> Table:
    """The memory of one agent, unsharded, in GiB."""
    s, w = mem.shape, mem.work
    table = Table(title=f"{mem.name}: {s.params / 1e9:.3f} B parameters ({s.source})", title_justify="left")
    table.add_column("part")
    table.add_column("GiB", justify="right")
    table.add_column("how")
    ckpt = "configured" if mem.checkpointing else "not configured"
    logits = (
        f"chunks of ≤ {min(w.micro_batch * (w.response_len or w.seq_len), chunk_rows(s.vocab))} response tokens"
        if mem.logprobs == "chunked"
        else f"4 × {w.micro_batch} × {w.seq_len} × {s.vocab:,} vocab × 4 bytes"
    )
    grads = "float32, of the masters" if mem.mode == "master" else f"{mem.trainable:,} trainable"
    rows = [
        ("weights", mem.weights, f"{mem.params:,} × {'float32' if mem.mode == 'autocast' else mem.param_dtype}"),
        ("gradients", mem.grads, grads + (" (LoRA adapters, fp32)" if mem.lora else "")),
        ("master copy", mem.master, f"float32 masters of the trainable weights ({mem.mode} mixed precision)"),
        ("AdamW state", mem.optimizer, "two moments + a step scalar per tensor"),
        ("reference", mem.reference, "KL reference (algorithm.kl_coef > 0)"),
        ("activations", mem.activations, f"micro-batch {w.micro_batch} × {w.seq_len} tokens, no checkpointing"),
        ("activations (ckpt)", mem.activations_checkpointed, f"with gradient checkpointing ({ckpt})"),
        (f"logits ({mem.logprobs})", mem.logits, logits),
        ("scoring forward", mem.scoring, "no-gradient log-probs of a micro-batch: logits + one layer"),
        ("optimizer step", mem.optimizer_temp, "AdamW's temporaries (none when fused, on CUDA)"),
        ("bf16 generation copy", mem.generation_copy, "float32 weights under autocast generate from a bf16 copy"),
        ("gathered units", mem.gathered + mem.unit_buffers[0], "2 layers + the embeddings' FSDP buffers (W > 1)"),
        ("vLLM weights", mem.vllm_weights, "when rollout=vllm (split over W by tensor parallelism)"),
    ]
    for part, size, how in rows:
        table.add_row(part, _gib(size), how)
    table.add_row("KV per token", f"{mem.kv_per_token / 2**10:,.0f} KiB", f"2 × {s.layers} layers × {s.kv_dim} × dtype")
    return table


def placement_table(result: Plan) -> Table:
    usable = result.usable_bytes / GIB
    table = Table(title=f"placement on {result.gpus} × {result.gpu_bytes / GIB:.0f} GiB ({usable:.0f} usable)")
    for column in ("agent", "W", "offload", "GPUs", "update peak/GPU", "rollout peak/GPU", "host RAM"):
        table.add_column(column, justify="left" if column in ("agent", "GPUs") else "right")
    for p in result.placements:
        gpus = f"{p.gpus[0]}-{p.gpus[-1]}" if len(p.gpus) > 1 else str(p.gpus[0])
        table.add_row(
            p.name, str(p.world), "on" if p.offload else "off", gpus,
            _gib(p.update_peak), _gib(p.rollout_peak), _gib(p.host_bytes),
        )  # fmt: skip
    return table


def shared_table(result: SharedPlan) -> Table:
    """executor.placement=shared: every agent on all the GPUs, one awake at a time (agents.memory_plan.SharedPlan)."""
    usable = result.usable_bytes / GIB
    title = f"shared placement on {result.gpus} × {result.gpu_bytes / GIB:.0f} GiB ({usable:.0f} usable), one awake"
    table = Table(title=title)
    columns = ("agent", "W", "GPUs", "awake peak/GPU", "asleep/GPU", "GPU while awake", "PCIe/step/GPU")
    for column in columns:
        table.add_column(column, justify="left" if column in ("agent", "GPUs") else "right")
    gpus = f"0-{result.world - 1}" if result.world > 1 else "0"
    for a, mem in enumerate(result.memories):
        table.add_row(
            mem.name, str(result.world), gpus, _gib(result.awake[a]), _gib(result.asleep[a]),
            _gib(result.per_gpu[a]), _gib(result.moved[a]),
        )  # fmt: skip
    return table


def step_order(names: list[str], placement: str) -> str:
    """One step's order of calls under `placement`: side by side (disjoint), or agent by agent between its wake and
    its sleep (shared; learn's wake brings the gradients and AdamW state too)."""
    if placement == "disjoint":
        together = " ∥ ".join(names)
        return f"step order (disjoint): rollout {together} → capability → learn {together} → log, eval, checkpoint"
    rollouts = [f"[wake {n} → rollout → sleep]" for n in names]
    learns = [f"[wake {n} +AdamW → learn → sleep]" for n in names]
    return f"step order (shared): {' → '.join(rollouts)} → capability → {' → '.join(learns)} → log, eval, checkpoint"


def layout_lines(result: Plan, tensor_parallel: int) -> list[str]:
    """One line per placed agent: its W as data-parallel × tensor-parallel ranks."""
    return [f"{p.name}: {Layout.of(p.world, tensor_parallel)}" for p in result.placements]


def main(argv: list[str] | None = None) -> int:
    """The command line `argv` (default sys.argv[1:]); 0 when the plan fits, else one line and exit 2 (SystemExit)."""
    argv = sys.argv[1:] if argv is None else argv
    with exit_on_bad_input(ConfigError):
        config = preflight(argv, "config")
        gpus, memory = cluster_size(config)
        multiplier = ALGORITHMS[config.algorithm.name].rollout_multiplier
        result = plan(config, gpus, memory, multiplier)
        shared = plan_shared(config, gpus, memory, multiplier)
        console = Console(width=120)
        say = partial(console.print, highlight=False, markup=False, soft_wrap=True)
        for mem in result.memories:
            console.print(agent_table(mem))
        names = [mem.name for mem in result.memories]
        if result.fits:
            console.print(placement_table(result))
            for line in layout_lines(result, config.rollout.tensor_parallel):
                say(line)
        say(f"disjoint: {result.line()}")
        say(step_order(names, "disjoint"))
        console.print(shared_table(shared))
        say(shared.line())
        say(
            f"shared: host RAM {shared.host_bytes / GIB:,.2f} GiB for the sleeping state; {step_order(names, 'shared')}"
        )
        chosen, why = choose_placement(config.executor.placement, result, shared)
        if chosen is None:
            raise ConfigError(why)
        say(f"executor.placement={config.executor.placement} → {chosen}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
