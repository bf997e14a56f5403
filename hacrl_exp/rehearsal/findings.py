"""The rehearsal's findings, what it changed, found and measured, and their page rehearsal.md (also printed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hacrl_exp.evaluation.markdown import markdown_table
from hacrl_exp.rehearsal.checks import EVALUATE_PROMPT_TOKENS, AgentView
from hacrl_exp.rehearsal.stats import PERCENTILES, Lengths, RoundTrip

FAILURES_SHOWN = 10


@dataclass
class AgentStats:
    """One agent's numbers: its prompts per data set, its gold solutions, and one prompt as rendered (verbatim)."""

    prompts: list[Lengths]
    solutions: Lengths
    example: str


@dataclass
class Findings:
    """Everything one rehearsal changed, found and measured; `markdown` is the rehearsal.md page."""

    command: str
    header: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    views: list[AgentView] = field(default_factory=list)
    stats: dict[str, AgentStats] = field(default_factory=dict)
    round_trips: list[RoundTrip] = field(default_factory=list)
    stages: list[tuple[str, float, list[str]]] = field(default_factory=list)
    """(stage, seconds, lines) in the order they ran."""
    prompt_limit: int = 0
    max_new_tokens: int = 0
    running: str | None = None
    """The stage running now (named by the error when it fails)."""

    def markdown(self) -> str:
        out = [f"# Rehearsal: {self.command}", "", *self.header, ""]
        verdict = f"**error**: {self.error}" if self.error else "**no errors**: every stage ran"
        out += [f"Result: {verdict}; {len(self.warnings)} warning(s).", ""]
        out += ["## Changes to the preset (only these)", "", *[f"- {c}" for c in self.changes], ""]
        out += ["## Errors and warnings", ""]
        out += [f"- error: {self.error}"] if self.error else []
        out += [f"- warning: {w}" for w in self.warnings] or ([] if self.error else ["- none"])
        out += ["", *self._agents(), *self._lengths(), *self._round_trips(), *self._examples(), *self._stages()]
        return "\n".join(out).rstrip() + "\n"

    def _agents(self) -> list[str]:
        rows = []
        for v in self.views:
            eos, pad = v.eos, v.pad
            pad_text = f"{pad[0]} ({pad[1]})" + ("" if pad[2] else ": none of its own, the run pads with eos")
            stops = ", ".join(f"{t} ({i})" for t, i in v.stop_tokens()) or "-"
            rollout_stops = ", ".join(f"{t} ({i})" for t, i in v.rollout_stops())
            rows.append(
                [
                    v.name,
                    v.source.checkpoint,
                    v.source.config.get("architectures", ["?"])[0],
                    f"{v.vocab_rows:,}",
                    f"{len(v.tokenizer):,}",
                    v.source.tokenizer_from,
                    f"{eos[0]} ({eos[1]})",
                    pad_text,
                    rollout_stops,
                    stops,
                    "chat template" if v.chat else "plain",
                    str(v.prompt_limit),
                ]  # fmt: skip
            )
        head = ["agent", "checkpoint", "class", "embedding rows", "tokenizer ids", "tokenizer from", "eos", "pad",
                "the rollout stops at", "its generation_config stops", "prompts", "prompt limit"]  # fmt: skip
        note = (
            "The rollout stops at, and cuts a response at, the first of: eos, the generation_config's stops, and the "
            "chat template's end of turn when the agent prompts with it (hacrl_exp/agents/stops.py)."
        )
        table = markdown_table(head, rows).splitlines()
        return ["## Agents: eos, pad and stop tokens as each will use them", "", note, "", *table, ""]

    def _lengths(self) -> list[str]:
        if not self.stats:
            return []
        qs = [f"p{q}" for q in PERCENTILES]
        head = ["agent", "prompts", "n", *qs, "max", "> prompt limit", f"> evaluate's {EVALUATE_PROMPT_TOKENS}"]
        rows, gold = [], []
        for v in self.views:
            stats = self.stats.get(v.name)
            if stats is None:
                continue
            for s in stats.prompts:
                rows.append([v.name, s.name, str(len(s.lengths)), *map(str, s.percentiles()), str(s.longest),
                             share(s.over(v.prompt_limit)), share(s.over(EVALUATE_PROMPT_TOKENS))])  # fmt: skip
            s = stats.solutions
            gold.append([v.name, s.name, str(len(s.lengths)), *map(str, s.percentiles()), str(s.longest),
                         share(s.over(self.max_new_tokens))])  # fmt: skip
        gold_head = ["agent", "gold solutions", "n", *qs, "max", f"> rollout.max_new_tokens={self.max_new_tokens}"]
        return [
            "## Prompt lengths (tokens, untruncated) against the prompt limit",
            "",
            "The run keeps the last `prompt limit` tokens of a longer prompt (the question's end).",
            "",
            *markdown_table(head, rows).splitlines(),
            "",
            "## Gold solutions against max_new_tokens",
            "",
            "What a competent model's answers would lose to truncation: a response is cut at rollout.max_new_tokens.",
            "",
            *markdown_table(gold_head, gold).splitlines(),
            "",
        ]

    def _round_trips(self) -> list[str]:
        if not self.round_trips:
            return []
        rows = [[f"{r.source} → {r.learner}", f"{r.exact}/{r.total} ({share(r.rate)})", f"{r.mean_ratio:.3f}",
                 f"{r.cut} ({share(r.cut / r.total if r.total else 0.0)})"] for r in self.round_trips]  # fmt: skip
        cut = f"> rollout.max_new_tokens={self.max_new_tokens} learner tokens (cut)"
        out = ["## Re-tokenisation: MATH-500 gold solutions, source → learner", "",
               "Source tokens → the source's text (skip special tokens) → the learner's tokens "
               "(trainer.step.retokenize) → the learner's text, compared with the original; the last column counts "
               "the texts the exchange would cut.", "",
               *markdown_table(["edge", "exact round trips", "mean tokens learner / source", cut], rows).splitlines(),
               ""]  # fmt: skip
        for r in self.round_trips:
            for row, reason in r.failures[:FAILURES_SHOWN]:
                out.append(f"- {r.source} → {r.learner}, row {row}: {reason}")
            if len(r.failures) > FAILURES_SHOWN:
                out.append(f"- {r.source} → {r.learner}: {len(r.failures) - FAILURES_SHOWN} more")
        return out + [""] if any(r.failures for r in self.round_trips) else out

    def _examples(self) -> list[str]:
        out = ["## One rendered prompt per agent (verbatim, as the first training step sends it)", ""]
        for v in self.views:
            if v.name in self.stats:
                out += [f"### {v.name}", "", "```text", self.stats[v.name].example, "```", ""]
        return out if len(out) > 2 else []

    def _stages(self) -> list[str]:
        if not self.stages:
            return []
        rows = [[name, f"{seconds:.1f}"] for name, seconds, _ in self.stages]
        out = ["## Stages", "", *markdown_table(["stage", "seconds"], rows).splitlines(), ""]
        for name, _, lines in self.stages:
            out += [f"### {name}", "", *lines, ""]
        return out


def share(value: float) -> str:
    return f"{100 * value:.2f}%"
