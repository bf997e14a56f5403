"""What a rehearsal checks of each pretrained agent from its tokenizer and config alone, before any model is built.

`check_agent` raises a one-line ConfigError for what would break the real run: no eos token, token ids outside the
model's embedding table, a chat template that drops the problem text, no room for a prompt in the model's positions.
It returns warning lines for what looks wrong but runs: a chat template whose end of turn cannot be found (the
rollout then cannot stop there), a prompt limit cut by the positions, plain prompts without the tokenizer's bos, and
what the rehearsal's own files differ in from the checkpoint's (sources.AgentSource.notes). The rollout stops at the
agent's stop ids (agents.stops.stop_token_ids), which the report lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hacrl_exp.agents.agent import prompt_token_ids, uses_chat_template
from hacrl_exp.agents.stops import stop_token_ids, template_end_of_turn
from hacrl_exp.config.schema import AgentConfig, Config
from hacrl_exp.errors import ConfigError
from hacrl_exp.rehearsal.sources import AgentSource

PROBE = "If $x + 3 = 5$, what is $x$? Probe 7Q2."
"""A problem the chat template must keep verbatim."""
EVALUATE_PROMPT_TOKENS = 2048
"""conf/evaluate.yaml's max_prompt_tokens: the prompt limit of `python -m hacrl_exp.evaluate`."""
EVALUATE_NEW_TOKENS = 8192
"""The math benchmarks' max_new_tokens (evaluation/_math.yaml), the paper's Table 1 budget."""


@dataclass
class AgentView:
    """One pretrained agent as the rehearsal sees it: its files' sources, and its tokenizer as the run loads it."""

    source: AgentSource
    cfg: AgentConfig
    tokenizer: object
    prompt_limit: int = 0
    """min(task.max_prompt_tokens, positions − rollout.max_new_tokens): the run's left-truncation length."""
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def chat(self) -> bool:
        return uses_chat_template(self.cfg, self.tokenizer)

    @property
    def vocab_rows(self) -> int:
        return int(self.source.config["vocab_size"])

    @property
    def positions(self) -> int | None:
        return self.source.config.get("max_position_embeddings")

    @property
    def eos(self) -> tuple[str, int]:
        return self.tokenizer.eos_token, self.tokenizer.eos_token_id

    @property
    def pad(self) -> tuple[str, int, bool]:
        """(token, id, own): the tokenizer's pad, else eos as `agents.agent.build_agent` sets it (own False)."""
        if self.tokenizer.pad_token_id is not None:
            return self.tokenizer.pad_token, self.tokenizer.pad_token_id, True
        return self.tokenizer.eos_token, self.tokenizer.eos_token_id, False

    def stop_tokens(self) -> list[tuple[str, int]]:
        """The checkpoint's generation_config stops, as (token, id)."""
        return [(self.tokenizer.convert_ids_to_tokens(i), i) for i in self.source.stops]

    def rollout_stops(self) -> list[tuple[str, int]]:
        """What the run's rollout stops at (agents.stops.stop_token_ids: eos, the generation_config's stops, the chat
        template's end of turn when it prompts with it), as (token, id)."""
        ids = stop_token_ids(self.tokenizer, list(self.source.stops), self.chat)
        return [(self.tokenizer.convert_ids_to_tokens(i), i) for i in ids]


def check_agent(view: AgentView, config: Config) -> list[str]:
    """Errors (ConfigError) and warnings (returned) for one agent; sets view.prompt_limit."""
    key, tok = view.source.key, view.tokenizer
    if tok.eos_token_id is None:
        raise ConfigError(f"{key}: its tokenizer ({view.source.tokenizer_from}) has no eos token; the rollout "
                          "could never stop. Give a tokenizer_config.json with eos_token")  # fmt: skip
    _check_ids(view)
    warnings = list(view.source.notes)
    if view.chat:
        warnings += _check_template(view)
    else:
        warnings += _check_plain(view)
    warnings += _check_positions(view, config)
    view.warnings = warnings
    return warnings


def _check_ids(view: AgentView) -> None:
    """Every id the tokenizer can produce indexes a row of the model's embedding table."""
    tok, rows = view.tokenizer, view.vocab_rows
    top = max([len(tok) - 1, *[i for i in tok.all_special_ids if i is not None]])
    if top >= rows:
        raise ConfigError(
            f"{view.source.key}: its tokenizer ({view.source.tokenizer_from}) has token ids up to {top}, but "
            f"{view.source.checkpoint} has {rows} embedding rows (vocab_size): ids ≥ {rows} index outside the "
            "embedding table. Use the checkpoint's own tokenizer (drop tokenizer.path or point it at the checkpoint)"
        )


def _check_template(view: AgentView) -> list[str]:
    """The chat template keeps the problem text, and its end of turn can be found (the rollout stops there)."""
    tok, key = view.tokenizer, view.source.key
    ids = prompt_token_ids(tok, [PROBE], True)[0]
    if PROBE not in tok.decode(ids):
        raise ConfigError(
            f"{key}: the chat template of its tokenizer ({view.source.tokenizer_from}) drops the problem text: the "
            f"rendered prompt does not contain it. Fix the template, or set {key}.chat_template=false"
        )
    if template_end_of_turn(tok) is None:
        stops = ", ".join(f"{t} ({i})" for t, i in view.rollout_stops())
        return [
            f"{key}: no special token follows an assistant answer in its chat template, so the rollout cannot stop "
            f"at the end of a turn, only at {stops}: an answer that ends its turn may run on to "
            f"rollout.max_new_tokens. Check the template, or set {key}.chat_template=false"
        ]
    return []


def _check_plain(view: AgentView) -> list[str]:
    tok = view.tokenizer
    ids = prompt_token_ids(tok, [PROBE], False)[0]
    if tok.bos_token_id is not None and (not ids or ids[0] != tok.bos_token_id):
        return [f"{view.source.key}: plain prompts get no bos {tok.bos_token} ({tok.bos_token_id}) from this tokenizer"]
    return []


def _check_positions(view: AgentView, config: Config) -> list[str]:
    """The run's prompt limit (agents.factory.make_agent's rule), and evaluate's budget, against the positions."""
    limit, new = config.task.max_prompt_tokens, config.rollout.max_new_tokens
    key, positions = view.source.key, view.positions
    view.prompt_limit = min(limit, positions - new) if positions else limit
    if view.prompt_limit < 8:
        raise ConfigError(
            f"rollout.max_new_tokens={new} leaves no room for a prompt in {key}'s {positions} positions; lower it"
        )
    warnings = []
    if view.prompt_limit < limit:
        warnings.append(f"{key}: prompts are cut to {view.prompt_limit} tokens, not task.max_prompt_tokens={limit}: "
                        f"{positions} positions − rollout.max_new_tokens={new}")  # fmt: skip
    if positions and positions < EVALUATE_PROMPT_TOKENS + EVALUATE_NEW_TOKENS:
        warnings.append(f"{key}: evaluate's {EVALUATE_NEW_TOKENS} new tokens + {EVALUATE_PROMPT_TOKENS} prompt "
                        f"tokens exceed its {positions} positions; evaluate cuts the budget")  # fmt: skip
    return warnings


def length_warnings(view: AgentView, stats, max_new_tokens: int) -> list[str]:
    """What the statistics say the run will cut: training prompts over the prompt limit, benchmark prompts over
    evaluate's, gold solutions over max_new_tokens (stats: the agent's findings.AgentStats)."""
    key, out = view.source.key, []
    train, *benchmarks = stats.prompts
    cut = int((train.lengths > view.prompt_limit).sum())
    if cut:
        out.append(
            f"{key}: {cut} of {len(train.lengths)} MATH training prompts ({cut / len(train.lengths):.2%}) exceed the "
            f"prompt limit {view.prompt_limit} (longest {train.longest}): the run keeps their last {view.prompt_limit} "
            "tokens, losing the problem's start and the template's opening"
        )
    for s in benchmarks:
        if s.over(EVALUATE_PROMPT_TOKENS):
            out.append(f"{key}: {s.over(EVALUATE_PROMPT_TOKENS):.2%} of {s.name}'s prompts exceed evaluate's "
                       f"max_prompt_tokens={EVALUATE_PROMPT_TOKENS}")  # fmt: skip
    if stats.solutions.over(max_new_tokens):
        out.append(f"{key}: {stats.solutions.over(max_new_tokens):.2%} of the MATH gold solutions are longer than "
                   f"rollout.max_new_tokens={max_new_tokens}")  # fmt: skip
    return out
