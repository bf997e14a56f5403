"""An agent worker: one agent and everything that touches its weights (model, tokenizer, optimizer, rollout engine,
reference model, random stream) behind the few calls the HACPO loop makes.

The same class runs in the trainer's process (executor=local) and as a Ray actor (executor=ray), see
`hacrl_exp.trainer.executor`. What crosses between the driver and a worker: problems in;
`SharedRollouts` (text, reward, the source's old mean log-prob and token count per response), metrics and
per-problem evaluation records out; the sources' `SharedRollouts` and the capability weights ρ into `learn`.
`rollout` runs phases 1–3 and `learn` phases 5–7 of one agent's step (hacrl_exp.trainer.step, where the phases are
numbered), with the `LearnerParams` the driver resolved once and handed to it.
Token ids, per-token log-probs and weights stay with their agent (checkpoints are written by each worker).

A sharded agent (agents.members.<name>.world_size W > 1, or fsdp.offload) is W workers, one per rank, each a Ray
actor built with its `RankGroup`, in two phases: every rank builds its agent, then rank 0 opens the group's
rendezvous socket (`store_port`, on the host the executor picked from where the ranks run) and all call `join` with
that host and port to form the process group and shard the agent. Every rank then gets every call with the same
inputs and divides its work with the others (see `AgentWorker`); the executor returns rank 0's result, and
`take_costs` the agent's (every rank's summed).

Randomness: every worker owns a torch random stream seeded from (seed, agent index) and swapped in around each
call, so an agent draws the same samples whether it shares a process with the other agents or runs alone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from hacrl_exp.agents import residency
from hacrl_exp.agents.agent import make_engine
from hacrl_exp.agents.devices import memory_metrics
from hacrl_exp.agents.factory import agent_seed, make_agent
from hacrl_exp.agents.ranks import ONE_RANK, RankGroup, gather, rank_rows
from hacrl_exp.config.schema import Config
from hacrl_exp.faults import crash_point
from hacrl_exp.rollout.base import SamplingSettings, compute_device
from hacrl_exp.rollout.vllm import Layout
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.base import Problem, Task
from hacrl_exp.trainer import step
from hacrl_exp.trainer.checkpoint import load_agent_state, save_agent_state
from hacrl_exp.trainer.costs import CostMeter, combine_ranks
from hacrl_exp.trainer.heldout import BenchmarkEvaluation, greedy_answers
from hacrl_exp.trainer.params import LearnerParams
from hacrl_exp.trainer.sharded_checkpoint import load_sharded_agent_state, save_sharded_agent_state
from hacrl_exp.trainer.step import SharedRollouts, SourceRollouts


def stream_seed(seed: int, index: int) -> int:
    """Seed of agent `index`'s sampling stream: a SeedSequence of (seed, index), independent across agents."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint64)[0])


class AgentWorker:
    """Agent `index` of config.agents.members, built where this object lives (warm start cached on disk).

    params: its `LearnerParams`, resolved once by the driver (`trainer.params.learner_params`); None for a frozen
    agent, which rolls out and is evaluated but never learns.
    task: the driver's task when the worker shares its process (one grader for all agents); else it builds its
    own from config.task, which gives the same prompts and grades.
    rank_group: set for one rank of a sharded agent (FSDP2, hacrl_exp.agents.sharding). Every rank then gets every
    call on the same inputs with the same random stream, and what the ranks divide among themselves they gather back,
    which is what makes W ranks exactly one W = 1 agent:
      - rollout, evaluate: every unit is all-gathered once at the start of the call and kept gathered to its end
        (`agents.sharding.gathered`), so generation runs on the full weights with no collective per forward. The
        ranks split the rows and all-gather the responses (`RankSlicedEngine`): each row's draws depend only on
        (call seed, row, step) (rollout.sampler=counter), so the split draws what W = 1 draws. Scoring the
        rollouts (old and reference log-probs) splits its rows over the ranks too (`rank_sliced_logprobs`: W = 1's
        log-probs to float32 rounding); rank 0's results are returned. A vLLM agent generates in its engines (W / T
        data-parallel replicas of T tensor-parallel ranks, each replica its share of the rows, all-gathered:
        rollout.vllm.Layout) and scores every row on every rank, unit by unit.
      - reward: rank r grades its `rank_rows` of the rollouts and the ranks gather the rewards
        (`step.collect_rollouts`).
      - learn: rank r trains on its share of each mini-batch's rows, split by tokens (`step.update`: W·loss_r, so
        FSDP's averaged gradient is the W = 1 gradient of the whole mini-batch); each rank steps AdamW on its shard.
    """

    def __init__(
        self,
        config: Config,
        index: int,
        params: LearnerParams | None,
        threads: int | None = None,
        task: Task | None = None,
        rank_group: RankGroup | None = None,
    ) -> None:
        if threads:
            torch.set_num_threads(threads)
        self.config, self.index, self.params, self.rank_group = config, index, params, rank_group
        self.names = list(config.agents.members)
        self.owns_task = task is None
        self.task = build_task(config.task) if task is None else task
        # its device: agents.members.<name>.device, else trainer.device; 'auto' places agents over the GPUs this
        # process sees, for a Ray actor the executor.gpus_per_agent GPUs Ray gave it (hacrl_exp.agents.devices)
        # a sharded agent's vLLM engine joins the agent's process group: `join` builds it, once the group is formed
        building = config
        if rank_group is not None and config.rollout.backend == "vllm":
            building = replace(config, rollout=replace(config.rollout, backend="hf"))
        self.agent = make_agent(building, self.task, None, index)
        self.listening = None  # rank 0's rendezvous socket (agents.sharding.store_socket) until `join` hands it over
        self.port: int | None = None
        # the one object behind both halves of every ratio: it generates the rollouts, scores their old log-probs,
        # and travels with them (SourceRollouts.sampling) to `learn`, which scores the new ones at its temperature
        self.sampling = SamplingSettings.of(config.rollout)
        self.benchmarks = BenchmarkEvaluation(config, self.task)
        self.device = compute_device(self.agent.model)
        self.score = None  # collect_rollouts' scoring: batched_response_logprobs, unless `join` splits it
        self.ranks = rank_group or ONE_RANK
        self.generating_ranks = self.scoring_ranks = ONE_RANK  # which rows this rank generates and scores: all of
        # them, unless `join` splits generation (RankSlicedEngine) or scoring (rank_sliced_logprobs) over the ranks
        self.rng: dict[str, torch.Tensor] = {}
        with self._rng_devices():
            torch.manual_seed(stream_seed(config.seed, index))
            self.rng = self._rng_state()
        self._own: SourceRollouts | None = None
        self._resampled: step.Resampled | None = None  # dynamic sampling's record of this step (trainer.step)
        self.cost = CostMeter()  # what rollout and learn cost since the loop last took it (trainer/costs.py)

    def ready(self) -> str:
        """The agent's name, once it is built (lets the Ray executor surface build errors at start)."""
        return self.agent.name

    def store_port(self, host: str = "127.0.0.1") -> int:
        """Rank 0 of a sharded agent: open its rendezvous socket on `host` (at the first call; listening from then
        on, `agents.sharding.store_socket`) and return its port, for every rank's `join`."""
        if self.rank_group is None or self.rank_group.rank != 0:
            raise RuntimeError(f"{self.agent.name}: store_port is asked of rank 0 of a sharded agent only")
        if self.port is None:
            from hacrl_exp.agents.sharding import store_socket

            self.listening = store_socket(host)
            self.port = int(self.listening.getsockname()[1])
        return self.port

    def join(self, port: int, host: str = "127.0.0.1", addresses: Sequence[str] = ()) -> None:
        """Form the agent's process group (rendezvous at host:port, rank 0's `store_port`) and shard the agent with
        FSDP2; the W ranks call it together, after building and before any other call. A collective.
        addresses: each rank's node address (Ray's), whose interface this rank's gloo connections use."""
        from hacrl_exp.agents.sharding import (
            RankSlicedEngine,
            full_weights,
            init_rank_group,
            rank_sliced_logprobs,
            shard_agent,
        )

        if self.rank_group is None:
            raise RuntimeError(f"{self.agent.name}: join is for the ranks of a sharded agent")
        rank, world = self.rank_group.rank, self.rank_group.world
        address = addresses[rank] if addresses else None
        init_rank_group(rank, world, port, self.device, self.listening, host, address)
        member, rollout, agent = self.config.agents.members[self.agent.name], self.config.rollout, self.agent
        shard_agent(agent, member, member.fsdp.offload)
        if rollout.backend == "vllm":  # one engine per rank: W / T data-parallel replicas of T ranks (rollout.vllm)
            weights = partial(full_weights, agent.model)
            seed = agent_seed(self.config, self.index)
            layout = Layout.of(self.rank_group.world, rollout.tensor_parallel, self.rank_group.rank)
            agent.engine = make_engine(
                member, agent.model, agent.tokenizer, agent.optimizer, rollout, rollout.max_batch_size, seed,
                weights=weights, layout=layout,
            )  # fmt: skip
            self.generating_ranks = RankGroup(layout.replica, layout.data_parallel)  # its replica's rows (Layout.rows)
            return  # its scoring forwards are collectives (no `gathered`): every rank scores every row
        agent.engine = RankSlicedEngine(agent.engine)
        self.generating_ranks = self.rank_group
        self.score, self.scoring_ranks = rank_sliced_logprobs, self.rank_group

    def rollout(
        self, problems: Sequence[Problem], group_size: int, step_number: int
    ) -> tuple[SharedRollouts, dict[str, float]]:
        """Phases 1–3 (ROLLOUT, REWARD, SCORE OWN) of one step: G samples per prompt with `self.sampling`, graded,
        scored by this agent's model before any update (spec §1.2) at the sampling temperature. Keeps the whole
        rollouts (with their sampling, which `learn` scores the new log-probs at) for `learn`; returns the part
        other agents see and the seconds of each phase. step_number (the loop's, from 1) keys dynamic sampling's
        fresh prompts."""
        times = dict.fromkeys(("generate", "reward", "score_own"), 0.0)
        score_batch = self.config.trainer.micro_batch_size

        def draw(chosen: Sequence[Problem]) -> step.SourceRollouts:
            return step.collect_rollouts(
                self.agent, self.index, list(chosen), group_size, self.sampling, self.task, score_batch, times,
                self.score, self.ranks,
            )  # fmt: skip

        def redraw(stale: list[int], round: int) -> step.SourceRollouts:  # dynamic sampling's extra round
            if self.params.dynamic_fresh_prompts:  # as DAPO: new prompts, from a stream of their own
                return draw(self.task.extra_problems(step_number, round, len(stale)))
            return draw([problems[p] for p in stale])

        with self.cost.process_time(), self._own_rng(), self._gathered():
            own = draw(problems)
            self._count(own.prompt_ids, own.response_ids)  # every row generated, before any is replaced
            self._resampled = None
            if self.params is not None and self.params.dynamic_target_rows:
                own, self._resampled = step.resample_degenerate(
                    own, redraw, self.params.dynamic_target_rows, self.params.dynamic_max_rounds
                )
                # every extra row generated, kept or not (dynamic sampling runs unsharded: trainer/validate.py)
                self._count(self._resampled.extra_prompt_ids, self._resampled.extra_rows)
            self._own = own
        return own.shared(), times

    def _count(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> None:
        """cost/* of rows this agent generated, graded and scored: this rank's share of each (rank_rows)."""
        rows = len(response_ids)
        self.cost.generated([response_ids[r] for r in rank_rows(rows, self.generating_ranks)])
        self.cost.graded(len(rank_rows(rows, self.ranks)))
        scored = rank_rows(rows, self.scoring_ranks)
        self.cost.scored(prompt_ids[scored.start : scored.stop], response_ids[scored.start : scored.stop],
                         models=1 + (self.agent.reference is not None))  # fmt: skip

    def learn(
        self, sources: dict[int, SharedRollouts], loss_weight: torch.Tensor
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Phases 5–7 (EXCHANGE, ADVANTAGE, UPDATE) of the step for this learner (hacrl_exp.trainer.step): its batch
        from its own rollouts of the step and its sources' shared ones, then every optimizer update.

        loss_weight: ρ(j→k) of this learner k, (N,) or (P, N); the baseline weight is 1/ρ (spec §2.1).
        Returns the learner's metrics and the seconds of build_batch and update."""
        if self._own is None or self.params is None:
            raise RuntimeError(f"{self.agent.name}: learn before rollout in this step, or a frozen agent")
        started = time.perf_counter()
        with self.cost.process_time():
            batch = step.build_batch(self._own, sources, loss_weight, self.agent.tokenizer, self.params)
            built = time.perf_counter()
            with self._own_rng():
                metrics = step.update(self.agent, batch, self.params, self.names, self.cost, self.ranks)
        metrics.update(memory_metrics([self.agent])[self.agent.name])  # per agent: weights+optimizer MiB, GPU peak
        if self._resampled is not None:  # dynamic sampling: what it took this step
            done = self._resampled
            metrics.update({"dynamic/rounds": float(done.rounds), "dynamic/cap_hit": float(done.cap_hit),
                            "dynamic/informative_rows": float(done.informative_rows),
                            "dynamic/extra_rollouts": float(len(done.extra_rows))})  # fmt: skip
        return metrics, {"build_batch": built - started, "update": time.perf_counter() - built}

    def wake(self, call: str) -> None:
        """executor.placement=shared, before `call` on the GPU this agent shares: its weights (and for learn, save,
        load and join its gradients and AdamW state) back from host RAM (agents.residency.wake). On a CPU device
        nothing moves."""
        residency.wake(self.agent, self.device, call, self._sharded)

    def sleep(self) -> None:
        """executor.placement=shared, after a call: weights to pinned host RAM, gradients and AdamW state to host RAM,
        the vLLM engine to sleep level 1, the allocator's free blocks released (agents.residency.sleep), so the next
        agent on this GPU has it. On a CPU device nothing moves."""
        residency.sleep(self.agent, self.device, self._sharded)
        crash_point("sleep")  # fault-injection hook (hacrl_exp.faults): a kill while an agent is put to sleep

    @property
    def _sharded(self) -> bool:
        return self.rank_group is not None

    def warm_start_metrics(self) -> dict[str, float]:
        """The agent's warm_start/* metrics (steps run, held-out accuracy reached; agents.factory), {} without."""
        return dict(self.agent.warm_start)

    def take_costs(self) -> dict[str, float]:
        """What this agent's rollout and learn calls cost since the last take (`CostMeter.take`), then zero; a sharded
        agent's, its ranks' combined (`combine_ranks`, a collective)."""
        ranks = gather(self.cost.take(), self.ranks)
        return ranks[0] if len(ranks) == 1 else combine_ranks(ranks)

    def evaluate(self, problems: Sequence[Problem], max_new_tokens: int) -> tuple[list[dict], dict[str, float]]:
        """Greedy answers to the held-out problems, one record per problem, and trainer.eval_benchmarks metrics."""
        with self._own_rng(), self._gathered(with_reference=False):
            return greedy_answers(self.agent, self.task, problems, max_new_tokens), self.benchmarks.metrics(self.agent)

    def save(self, folder: str | Path) -> None:
        """Write this agent's part of an unpublished checkpoint folder (weights, optimizer, random stream)."""
        if self.rank_group is not None:
            save_sharded_agent_state(self.agent, Path(folder), self.rng, self.rank_group.rank)
        else:
            save_agent_state(self.agent, Path(folder), self.rng)

    def load(self, folder: str | Path) -> None:
        """Restore this agent from checkpoint `folder`."""
        if self.rank_group is not None:
            rng = load_sharded_agent_state(Path(folder), self.agent)
        else:
            rng = load_agent_state(Path(folder), self.agent)
        if rng is not None:
            self.rng = rng

    def close(self) -> None:
        """Stop the grader processes of a task this worker built (a math task's math-verify workers)."""
        close = getattr(self.task, "close", None)
        if self.owns_task and close is not None:
            close()
        if self.rank_group is not None and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        if self.listening is not None:
            self.listening.close()
            self.listening = None

    def _gathered(self, with_reference: bool = True):
        """A sharded agent's weights (and its reference's) gathered for a no-gradient call (agents.sharding.gathered);
        else nothing."""
        if self.rank_group is None or self.config.rollout.backend == "vllm":
            # a vLLM agent generates in its engine; its scoring forwards gather unit by unit (FSDP's default), so
            # the rank never holds the full training weights next to vLLM's (the planner's rollout peak)
            return nullcontext()
        from hacrl_exp.agents.sharding import gathered

        reference = (
            self.agent.reference if with_reference and isinstance(self.agent.reference, torch.nn.Module) else None
        )
        return gathered(self.agent.model, reference)

    def _rng_devices(self):
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        return torch.random.fork_rng(devices=cuda)  # restores the process's stream afterwards

    def _rng_state(self) -> dict[str, torch.Tensor]:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    @contextmanager
    def _own_rng(self) -> Iterator[None]:
        with self._rng_devices():
            torch.set_rng_state(self.rng["cpu"])
            if self.device.type == "cuda" and "cuda" in self.rng:
                torch.cuda.set_rng_state(self.rng["cuda"], self.device)
            yield
            self.rng = self._rng_state()
