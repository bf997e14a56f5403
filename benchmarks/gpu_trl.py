"""The GPU check's TRL row: our GSPO step next to TRL's GRPOTrainer in GSPO mode (importance_sampling_level=
"sequence", loss_type="grpo") on the same workload, one after the other in one process, as a ratio of seconds.

The workload is benchmarks.gpu_workload's for one agent: P prompts × G, prompt_len + response_len random tokens,
random 0/1 rewards, micro-batches of micro_batch rows, two optimizer updates per step, the old log-probs scored
before them. TRL gets the same prompts and responses through its `rollout_func` (no generation on either side),
per_device_train_batch_size = micro_batch, gradient_accumulation_steps = rows / 2 / micro_batch,
steps_per_generation = rows / micro_batch (so it scores the old log-probs too), β = 0, no gradient checkpointing,
TRL's own mixed precision on CUDA (bf16=True: float32 weights under autocast), fused AdamW. One of our steps = two
TRL optimizer steps. Ours: model.mixed_precision=master, the chunked log-prob path (benchmarks.gpu_check).
"""

from __future__ import annotations

import tempfile
import time

import torch

from benchmarks.gpu_workload import GIB, Sizes, make_agents, qwen3, random_rows, sync, train_step
from hacrl_exp.config.schema import LoraConfig, ModelConfig

GSPO_MODE = dict(
    importance_sampling_level="sequence",  # GSPO's sequence-level ratio
    loss_type="grpo",
    scale_rewards="group",
    beta=0.0,
    epsilon=3e-4,
    epsilon_high=4e-4,
    lr_scheduler_type="constant",
    max_grad_norm=1.0,
    fp16=False,
    gradient_checkpointing=False,
    logging_steps=10**9,
    save_strategy="no",
    report_to="none",
    shuffle_dataset=False,
    remove_unused_columns=False,
    disable_tqdm=True,
    log_completions=False,
)
"""GRPOConfig settings both TRL comparisons share (benchmarks.trl_gspo on CPU, this row on a GPU): GSPO as in our
objective (ε 3e-4 / 4e-4, no KL), constant learning rate, grad clip 1, no checkpointing, logging or saving."""


def trl_trainer(sizes: Sizes, device: torch.device, tokenizer, steps: int, folder: str):
    """A GRPOTrainer in GSPO mode over `steps` of our steps (2·steps optimizer steps) of the synthetic workload."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    rows = sizes.prompts * sizes.group
    prompts = random_rows(sizes, sizes.prompts, sizes.prompt_len, seed=1)
    calls = {"n": 0}

    def rollout(batch_prompts, trainer):
        calls["n"] += 1
        responses = random_rows(sizes, len(batch_prompts), sizes.response_len, seed=5000 + calls["n"])
        ids = [prompts[int(p[1:])] for p in batch_prompts]
        return {"prompt_ids": ids, "completion_ids": responses, "logprobs": None}

    rewards = torch.Generator().manual_seed(7)

    def reward(prompts, completions, **_):
        return torch.randint(0, 2, (len(completions),), generator=rewards).double().tolist()

    cuda = device.type == "cuda"
    args = GRPOConfig(
        output_dir=folder,
        per_device_train_batch_size=sizes.micro_batch,
        gradient_accumulation_steps=max(1, rows // 2 // sizes.micro_batch),
        steps_per_generation=max(1, rows // sizes.micro_batch),
        num_generations=sizes.group,
        max_completion_length=sizes.response_len,
        learning_rate=1e-6,
        weight_decay=0.0,
        max_steps=2 * steps,
        use_cpu=not cuda,
        bf16=cuda,
        optim="adamw_torch_fused" if cuda else "adamw_torch",
        seed=0,
        **GSPO_MODE,
    )
    dataset = Dataset.from_list([{"prompt": f"p{i % sizes.prompts}"} for i in range(sizes.prompts * steps)])
    return GRPOTrainer(
        model=qwen3(sizes, device, seed=0),
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )


def trl_step_seconds(trainer, device: torch.device) -> list[float]:
    """Seconds of each of our steps (two optimizer steps) of a TRL run, generation and scoring included."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback

    marks: list[float] = []

    class Marks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            sync(device)
            marks.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            sync(device)
            marks.append(time.perf_counter())

    trainer.add_callback(Marks())
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return [marks[i + 2] - marks[i] for i in range(0, len(marks) - 2, 2)]


def measure_trl(sizes: Sizes, device: torch.device, tokenizer, model_cfg: ModelConfig) -> dict:
    """Ours and TRL's seconds per step (mean of sizes.steps after one warm-up step each), peaks, and ours / TRL."""
    import trl

    cuda = device.type == "cuda"
    agents = make_agents(sizes, device, tokenizer, model_cfg, LoraConfig(), n=1)
    train_step(agents, "gspo", sizes, step=0)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ours = [train_step(agents, "gspo", sizes, step=s + 1)[0] for s in range(sizes.steps)]
    ours_peak = torch.cuda.max_memory_allocated(device) / GIB if cuda else float("nan")
    del agents
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as folder:
        theirs = trl_step_seconds(trl_trainer(sizes, device, tokenizer, 1 + sizes.steps, folder), device)[1:]
    trl_peak = torch.cuda.max_memory_allocated(device) / GIB if cuda else float("nan")
    ours_s, trl_s = sum(ours) / len(ours), sum(theirs) / len(theirs)
    return {
        "trl": trl.__version__,
        "ours_s": ours_s,
        "trl_s": trl_s,
        "ours_over_trl": ours_s / trl_s,
        "ours_steps_s": ours,
        "trl_steps_s": theirs,
        "ours_peak_gib": ours_peak,
        "trl_peak_gib": trl_peak,
    }
