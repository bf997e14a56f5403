"""vLLM rollout backend (optional extra `.[gpu]`, CUDA only), behind the same interface as `hf`.

Prompt token ids go straight in (TokensPrompt, no tokenizer inside vLLM); sampling settings map one to one onto the
HF backend's; generation stops at the agent's stop ids (its EOS, its generation config's, its chat template's end of
turn: agents.stops), and responses come back as token ids cut at the first of them exactly as `hf.split_response`
cuts them, and are decoded by the agent's own tokenizer. vLLM's own log-probs are never used: the training model
recomputes the source's old log-probs (spec §1.2).

Training and generation share the GPU: the engine sleeps between generations (sleep_level 2 frees its weights and
KV cache, 1 parks the weights in CPU RAM) and, before the first generation after an optimizer step, wakes and loads
the training model's current weights with `load_weights`, the in-process path TRL's colocate mode uses. The weights
come from a callback the agent passes (`weights=`; for a LoRA agent, `hacrl_exp.agents.lora.merged_weights`), so this
package never imports `agents`. The engine starts from the model's config with dummy weights, so nothing is written to
or read from disk.

A sharded agent (W ranks, hacrl_exp.agents.sharding) is W = data-parallel × tensor-parallel (`Layout`,
rollout.tensor_parallel = T): every rank builds one engine in vLLM's external-launcher mode over the agent's process
group (already formed; vLLM reuses it) with tensor_parallel_size=T and data_parallel_size=W/T, the SPMD layout of
vLLM's torchrun data-parallel example. vLLM groups ranks [d·T, (d+1)·T) into replica d (its RANK // T); each rank
holds its 1/T slice of the weights (`load_weights` takes the full tensors, which the ranks gather one at a time, and
keeps its slice). Replica d generates the contiguous rows [d·B/D, (d+1)·B/D) of a call's B rows, one request per row
(its T ranks send the same requests with the same seeds, so they get the same outputs), and the ranks all-gather
the responses, so every rank holds all B rows in order. Written against vLLM's API and tested on CPU against a
fake engine; GPU-only to run, and never run (docs/gpu.md). tests/rollout/test_vllm_contract.py checks every vLLM
name and keyword used here against the installed vLLM's source.

Seeds: each generate call takes one call seed from the agent's torch stream (as the hf backend's counter sampler
does) and sends one request per row (n = 1) whose SamplingParams.seed is `hf.row_seed(call_seed, row)`, row its index
in the whole call, so a row's draws do not depend on which rank or replica serves it, nor on the other requests'
seeds. vLLM seeds that request's own torch.Generator; its tokens are the same in any batch only where the logits are
too (VLLM_BATCH_INVARIANT=1; docs/gpu.md, "Seeds and batch invariance"). They are not the hf backend's tokens: the
samplers differ.
"""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hacrl_exp.config.schema import VLLMConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.rollout.base import Rollouts, SamplingSettings, pad_and_stop_ids
from hacrl_exp.rollout.hf import row_seed, split_response

INSTALL = 'pip install -e ".[gpu]" on a CUDA machine, or use rollout=hf'


def require_vllm():
    """The vllm module, or a one-line ConfigError naming the extra to install."""
    try:
        import vllm
    except Exception as exc:  # ImportError, or a broken CUDA build raising at import
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"rollout.backend=vllm needs vLLM, which does not import ({first}): {INSTALL}") from None
    return vllm


def sampling_kwargs(sampling: SamplingSettings, n: int, stop_ids: int | Sequence[int]) -> dict[str, Any]:
    """vllm.SamplingParams keyword arguments equivalent to `HFRolloutEngine`'s generation config.

    Greedy (do_sample False or temperature 0) → temperature 0. Otherwise temperature, top_p and top_k as given
    (-1 disables top-k in both). Generation stops at any of the agent's stop ids (stop_token_ids: its EOS, or the
    engine's `stop_ids`; vLLM has no tokenizer here), after at most max_new_tokens; no penalties, no min_p, no sampler
    log-probs.
    """
    kwargs: dict[str, Any] = dict(
        n=n,
        max_tokens=sampling.max_new_tokens,
        stop_token_ids=[stop_ids] if isinstance(stop_ids, int) else list(stop_ids),
        detokenize=False,
        repetition_penalty=1.0,
        min_p=0.0,
        logprobs=None,
    )
    if sampling.greedy:
        kwargs.update(temperature=0.0, top_p=1.0, top_k=-1)
    else:
        top_k = sampling.top_k if sampling.top_k > 0 else -1
        kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=top_k)
    return kwargs


def request_seeds(call_seed: int | None, count: int, first_row: int = 0) -> list[int | None]:
    """The SamplingParams seed of each of `count` rows, one request per row (n = 1): `hf.row_seed(call_seed,
    first_row + i)` for row i (row first_row + i of the whole call; None when greedy, `call_seed` None). A row's
    request, seed included, is then the same whichever rank or replica serves it. The rows of a prompt share its KV
    blocks through vLLM's prefix cache, as the n children of one request would."""
    return [None if call_seed is None else row_seed(call_seed, first_row + i) for i in range(count)]


def tokens_prompts(prompt_ids: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """vllm TokensPrompt dicts: the agent's own prompt token ids, passed through unchanged."""
    return [{"prompt_token_ids": [int(t) for t in ids]} for ids in prompt_ids]


def rollouts_from_outputs(
    outputs: Sequence[Any],
    prompt_ids: Sequence[Sequence[int]],
    n: int,
    stop_ids: int | Sequence[int],
    pad_id: int,
    tokenizer,
) -> Rollouts:
    """Rollouts from vLLM RequestOutputs (one per prompt, in prompt order, each with n completions).

    Row r belongs to prompt r // n, as in the HF backend. Each completion's token ids are cut at the first of
    `stop_ids` (the EOS, or the agent's stop set) with `hf.split_response` (a stop-only response keeps its stop
    token); `finished` also holds when vLLM reports it stopped on a stop id without returning it (an empty response
    then keeps the EOS, the first stop id).
    """
    if len(outputs) != len(prompt_ids):
        raise ValueError(f"{len(outputs)} vLLM outputs for {len(prompt_ids)} prompts")
    eos = stop_ids if isinstance(stop_ids, int) else stop_ids[0]
    rows, responses, finished = [], [], []
    for prompt, output in zip(prompt_ids, outputs):
        completions = sorted(output.outputs, key=lambda c: c.index)
        if len(completions) != n:
            raise ValueError(f"a vLLM output has {len(completions)} completions, expected n={n}")
        for completion in completions:
            tokens, done = split_response(list(completion.token_ids), stop_ids, pad_id)
            if not done and completion.finish_reason == "stop":
                tokens, done = (tokens or [eos]), True
            rows.append(list(prompt))
            responses.append(tokens)
            finished.append(done)
    texts = tokenizer.batch_decode(responses, skip_special_tokens=True) if responses else []  # [] would decode to ['']
    return Rollouts(prompt_ids=rows, response_ids=responses, texts=texts, finished=finished)


@dataclass(frozen=True)
class Layout:
    """An agent's W ranks as data-parallel replicas of `tensor_parallel` ranks each: W = data_parallel ×
    tensor_parallel. Replica d is ranks [d·T, (d+1)·T), vLLM's own grouping (external launcher: RANK // T)."""

    world: int = 1
    tensor_parallel: int = 1
    rank: int = 0

    def __post_init__(self) -> None:
        if self.world % self.tensor_parallel or not 0 <= self.rank < self.world:
            raise ValueError(f"rank {self.rank} of W={self.world} with tensor_parallel={self.tensor_parallel}")

    @classmethod
    def of(cls, world: int, tensor_parallel: int, rank: int = 0) -> Layout:
        """The layout of an agent at W = world under rollout.tensor_parallel: an unsharded agent (W = 1) runs one
        engine on its one GPU whatever tensor_parallel says."""
        return cls(world, tensor_parallel if world > 1 else 1, rank)

    @property
    def data_parallel(self) -> int:
        return self.world // self.tensor_parallel

    @property
    def replica(self) -> int:
        return self.rank // self.tensor_parallel

    def rows(self, total: int) -> tuple[int, int]:
        """[low, high): this rank's replica's contiguous share of `total` rows (earlier replicas get one fewer when
        D does not divide them; a replica may get none)."""
        d, replicas = self.replica, self.data_parallel
        return total * d // replicas, total * (d + 1) // replicas

    def __str__(self) -> str:
        return f"W={self.world} = {self.data_parallel} data-parallel × {self.tensor_parallel} tensor-parallel"

    def engine_kwargs(self) -> dict[str, Any]:
        """vllm.LLM keyword arguments for this rank's engine ({} at W = 1). External-launcher mode reads the rank
        from RANK (its replica is RANK // T) and the device from LOCAL_RANK, which `join_group` sets; the group
        itself must be formed first, vLLM reuses it."""
        if self.world == 1:
            return {}
        return dict(
            tensor_parallel_size=self.tensor_parallel,
            data_parallel_size=self.data_parallel,
            distributed_executor_backend="external_launcher",
        )

    def join_group(self, device_index: int) -> None:
        """Point vLLM's external launcher at this rank of the agent's formed process group (nothing at W = 1)."""
        if self.world == 1:
            return
        dist = torch.distributed
        if not dist.is_initialized() or dist.get_world_size() != self.world or dist.get_rank() != self.rank:
            raise RuntimeError(f"a vLLM engine at rank {self.rank} of {self.world} needs that process group formed")
        os.environ.update(RANK=str(self.rank), LOCAL_RANK=str(device_index), WORLD_SIZE=str(self.world))

    def gather(self, mine: Rollouts, rows: list[list[int]]) -> Rollouts:
        """Every replica's share, all-gathered over the agent's ranks (a collective; the first rank of each replica
        speaks for it), in row order: what one engine generating all `rows` returns."""
        if self.world == 1:
            return mine
        parts: list = [None] * self.world
        torch.distributed.all_gather_object(parts, (mine.response_ids, mine.texts, mine.finished))
        firsts = [parts[d * self.tensor_parallel] for d in range(self.data_parallel)]
        responses, texts, finished = ([x for part in firsts for x in part[i]] for i in range(3))
        return Rollouts(prompt_ids=rows, response_ids=responses, texts=texts, finished=finished)


def cuda_index(model: torch.nn.Module) -> int:
    """This process's current GPU, which the agent must be on: vLLM runs in-process there."""
    device = next(model.parameters()).device
    if device.type != "cuda":
        raise ConfigError(f"rollout.backend=vllm needs the agent on a CUDA device, not {device}; {INSTALL}")
    if device.index not in (None, torch.cuda.current_device()):
        raise ConfigError(
            f"rollout.backend=vllm runs on this process's current GPU (cuda:{torch.cuda.current_device()}), but "
            f"the agent is on {device}; run agents on other GPUs as Ray actors (executor=ray)"
        )
    return torch.cuda.current_device()


class VLLMRolloutEngine:
    """Samples with an in-process vLLM engine that follows the agent's training model.

    The training model stays the source of truth; `mark_stale()` (hooked to the optimizer's step) makes the next
    `generate` load its weights first, from `weights()`: (Hugging Face name, tensor) pairs, LoRA merged in; default
    the model's state dict (right for a model without adapters). `stop_ids`: as the HF engine's (agents.stops).
    `layout`: this rank's place in a sharded agent (`Layout`; default W = 1). Every rank of the agent makes every
    call (sleep, wake, sync and generate are collectives then).
    """

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        settings: VLLMConfig,
        *,
        dtype: str = "bfloat16",
        seed: int = 0,
        optimizer: torch.optim.Optimizer | None = None,
        weights: Callable[[], Iterable[tuple[str, torch.Tensor]]] | None = None,
        layout: Layout = Layout(),
        stop_ids: Sequence[int] = (),
    ):
        vllm = require_vllm()
        device_index = cuda_index(model)
        self.model, self.tokenizer, self.settings, self.layout = model, tokenizer, settings, layout
        self._weights = weights or (lambda: model.state_dict().items())
        self.pad_id, self.stop_ids = pad_and_stop_ids(tokenizer, stop_ids)
        self._vllm = vllm
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process: weights load without copies
        os.environ.setdefault("VLLM_HOST_IP", "127.0.0.1")  # its torch.distributed rendezvous stays local
        layout.join_group(device_index)
        self._config_dir = tempfile.TemporaryDirectory(prefix="hacrl_vllm_")
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = copy.deepcopy(base.config)
        # models built from a config have none, and vLLM picks its model class by it (FSDP2's class is FSDP<name>)
        config.architectures = [type(base).__name__.removeprefix("FSDP")]
        config.save_pretrained(self._config_dir.name)  # architecture only: weights come from the trainer
        self.llm = vllm.LLM(
            model=self._config_dir.name,
            load_format="dummy",
            skip_tokenizer_init=True,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            enable_sleep_mode=settings.sleep_level > 0,
            enforce_eager=settings.enforce_eager,
            max_model_len=settings.max_model_len,
            **layout.engine_kwargs(),
        )
        self.stale = True  # dummy weights until the first sync
        self._sleeping: set[str] = set()
        if settings.sleep_level:
            self.llm.sleep(level=2)  # nothing worth keeping yet
            self._sleeping = {"weights", "kv_cache"}
        if optimizer is not None:
            optimizer.register_step_post_hook(lambda *_: self.mark_stale())

    def _wake(self, tag: str) -> None:
        if tag in self._sleeping:
            self.llm.wake_up(tags=[tag])
            self._sleeping.discard(tag)

    def sleep(self, level: int = 1) -> None:
        """Free the GPU for another agent (executor.placement=shared): level 1 parks the weights in host RAM and drops
        the KV cache, level 2 drops both (then the next generation syncs). Already asleep: nothing; the next
        `generate` wakes it."""
        if self._sleeping != {"weights", "kv_cache"}:
            self.llm.sleep(level=level)
            self._sleeping = {"weights", "kv_cache"}
            self.stale = self.stale or level == 2

    def mark_stale(self) -> None:
        """The training model changed: load its weights before the next generation."""
        self.stale = True

    def sync_weights(self, weights: Iterable[tuple[str, torch.Tensor]] | None = None) -> None:
        """Load the training model's weights (Hugging Face names, LoRA merged) into the engine: the engine's own
        model (in-process, `LLM.apply_model`) takes the full tensors and keeps its tensor-parallel slice."""
        self._wake("weights")
        weights = weights if weights is not None else self._weights()
        self.llm.apply_model(lambda engine_model: engine_model.load_weights(weights))
        self.llm.reset_prefix_cache()
        self.stale = False

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[list[int]], n: int, sampling: SamplingSettings) -> Rollouts:
        """n samples per prompt; rows are grouped by prompt (row r belongs to prompt r // n). One request per row;
        this rank's replica generates its share of the rows (`Layout.rows`), and every rank returns all of them."""
        if self.stale:
            self.sync_weights()
        self._wake("weights")
        self._wake("kv_cache")
        rows = [list(p) for p in prompt_ids for _ in range(n)]
        low, high = self.layout.rows(len(rows))
        call_seed = None if sampling.greedy else int(torch.randint(0, 2**63 - 1, (1,)).item())  # the agent stream's
        kwargs = sampling_kwargs(sampling, 1, self.stop_ids)
        seeds = request_seeds(call_seed, high - low, first_row=low)
        params = [self._vllm.SamplingParams(**kwargs, seed=seed) for seed in seeds]
        # a replica with no rows still calls generate: vLLM's data-parallel replicas step together
        outputs = self.llm.generate(tokens_prompts(rows[low:high]), sampling_params=params, use_tqdm=False)
        level = self.settings.sleep_level
        if level:
            self.llm.sleep(level=level)
            self._sleeping = {"weights", "kv_cache"}
            self.stale = self.stale or level == 2  # level 2 discarded the weights
        mine = rollouts_from_outputs(outputs, rows[low:high], 1, self.stop_ids, self.pad_id, self.tokenizer)
        return self.layout.gather(mine, rows)
