"""A CPU stand-in for the `vllm` package: what hacrl_exp/rollout/vllm.py calls, by vLLM's own names only.

Every class, method, parameter and field here exists in the real vLLM with that name
(tests/rollout/test_vllm_contract.py checks this fake against the installed vLLM's source), so a call the fake
accepts is one the real engine accepts. `install()` puts it in sys.modules["vllm"].

An engine checks what vLLM's external launcher needs (RANK, LOCAL_RANK, the formed process group of
tensor_parallel_size × data_parallel_size ranks) and takes its replica as RANK // tensor_parallel_size, as vLLM's
ParallelConfig does. It records every request. A response is a function of the prompt, the engine's seed and the
request's seed alone, so the same row gets the same tokens from any engine of any layout; it draws from the prompt's
own tokens and the stop ids, and stops at the first stop id (kept, as vLLM keeps non-special stop tokens).
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

ENGINE_ARGS = frozenset(
    {"load_format", "enable_sleep_mode", "max_model_len", "data_parallel_size", "distributed_executor_backend"}
)
"""The keyword arguments the fake takes through `LLM(**kwargs)`, which the real LLM passes to EngineArgs."""


@dataclass
class SamplingParams:
    n: int = 1
    max_tokens: int | None = 16
    stop_token_ids: list[int] | None = None
    detokenize: bool = True
    repetition_penalty: float = 1.0
    min_p: float = 0.0
    logprobs: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: Any
    finish_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int] | None
    prompt_logprobs: Any
    outputs: list[CompletionOutput]
    finished: bool


@dataclass
class _Model:
    """The engine's model: `load_weights` consumes the (name, full tensor) pairs, as every rank must."""

    loaded: dict[str, torch.Tensor] = field(default_factory=dict)

    def load_weights(self, weights) -> set[str]:
        self.loaded = {name: tensor.detach().clone() for name, tensor in weights}
        return set(self.loaded)


class LLM:
    """One engine; `engines` holds every one built in this process, `requests` the prompts of each generate."""

    engines: list[LLM] = []

    def __init__(
        self,
        model: str,
        *,
        skip_tokenizer_init: bool = False,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.92,
        enforce_eager: bool = False,
        **kwargs: Any,
    ) -> None:
        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(f"fake vllm.LLM got unexpected keyword arguments {sorted(unknown)}")
        self.kwargs = dict(model=model, skip_tokenizer_init=skip_tokenizer_init, dtype=dtype, seed=seed,
                           tensor_parallel_size=tensor_parallel_size, enforce_eager=enforce_eager,
                           gpu_memory_utilization=gpu_memory_utilization, **kwargs)  # fmt: skip
        self.seed, self.model = seed, _Model()
        self.sleep_mode = kwargs.get("enable_sleep_mode", False)
        data_parallel = kwargs.get("data_parallel_size", 1)
        self.replica = 0
        if kwargs.get("distributed_executor_backend") == "external_launcher":
            dist = torch.distributed
            world = tensor_parallel_size * data_parallel
            assert dist.is_initialized() and dist.get_world_size() == world, "external launcher: group not formed"
            assert int(os.environ["RANK"]) == dist.get_rank() and "LOCAL_RANK" in os.environ
            self.replica = int(os.environ["RANK"]) // tensor_parallel_size
        else:
            assert tensor_parallel_size == data_parallel == 1, "parallel engines need the external launcher here"
        self.sleeping: set[str] = set()
        self.requests: list[list[list[int]]] = []
        self.params: list[list[SamplingParams]] = []  # per generate call, each request's
        self.calls: list[str] = []
        LLM.engines.append(self)

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        assert self.sleep_mode, "sleep needs enable_sleep_mode=True"
        self.calls.append(f"sleep({level})")
        self.sleeping = {"weights", "kv_cache"}
        if level == 2:
            self.model.loaded = {}  # level 2 discards the weights

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.append(f"wake_up({tags})")
        self.sleeping -= set(tags or ("weights", "kv_cache"))

    def apply_model(self, func) -> list:
        assert "weights" not in self.sleeping, "weights asleep"
        self.calls.append("apply_model")
        return [func(self.model)]

    def reset_prefix_cache(self, reset_running_requests: bool = False, reset_connector: bool = False) -> bool:
        self.calls.append("reset_prefix_cache")
        return True

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True) -> list:
        """sampling_params: one SamplingParams for every prompt, or a list of one per prompt (as vLLM takes)."""
        assert not self.sleeping, f"generate while {sorted(self.sleeping)} asleep"
        rows = [list(p["prompt_token_ids"]) for p in prompts]
        params = (
            sampling_params if isinstance(sampling_params, list) else [sampling_params or SamplingParams()] * len(rows)
        )
        assert len(params) == len(rows), "vLLM wants one SamplingParams per prompt, or one for all"
        self.calls.append("generate")
        self.requests.append(rows)
        self.params.append(params)
        return [self._answer(i, row, p) for i, (row, p) in enumerate(zip(rows, params))]

    def _answer(self, i: int, prompt: list[int], params: SamplingParams) -> RequestOutput:
        stops = list(params.stop_token_ids or [])
        pool = sorted(set(prompt) | set(stops))
        completions = []
        for k in range(params.n):
            rng = random.Random(f"{prompt}|{self.seed}|{params.seed}|{k}")
            tokens, reason = [], "length"
            for _ in range(params.max_tokens or 16):
                tokens.append(rng.choice(pool))
                if tokens[-1] in stops:
                    reason = "stop"
                    break
            completions.append(CompletionOutput(k, "", tokens, None, None, reason))
        return RequestOutput(str(i), None, prompt, None, completions, True)


def install() -> None:
    """Make `import vllm` give this module (in this process)."""
    sys.modules["vllm"] = sys.modules[__name__]
