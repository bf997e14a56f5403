"""Tiny agents: tokenizer round trips, model builds for each arch, warm start (to a step count or a target held-out
accuracy) and its cache."""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path

import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

from hacrl_exp.agents.factory import warm_started_tiny_model
from hacrl_exp.agents.tiny import ARCHS, build_tiny_model, build_tokenizer
from hacrl_exp.agents.warmstart import (
    IGNORE_INDEX,
    AccuracyTarget,
    cache_key,
    check_subset,
    collate_right_padded,
    greedy_accuracy,
    supervised_warm_start,
    warm_start_cached,
)
from hacrl_exp.tasks import build_task
from hacrl_exp.tasks.arithmetic import ALPHABET, ArithmeticTask
from hacrl_exp.trainer.validate import preflight
from tests.e2e.tiny import tiny_overrides

TASK = ArithmeticTask(eval_per_tier=10)
TOKENIZERS = {
    "char": build_tokenizer("char", ALPHABET),
    "bpe": build_tokenizer("bpe", ALPHABET, TASK.sample_texts(500), vocab_size=64),
}
TEXT = "141+365=1+5+0=06,4+6+0=10,1+3+1=05|605"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=80), st.sampled_from(list(TOKENIZERS)))
def test_round_trip_over_alphabet(text, kind):
    tok = TOKENIZERS[kind]
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert tok(text)["input_ids"] == ids, "encode must not insert special tokens"
    assert tok.decode([*ids, tok.eos_token_id], skip_special_tokens=True) == text


@pytest.mark.parametrize("kind", list(TOKENIZERS))
def test_tokenizer_properties(kind, tmp_path):
    tok = TOKENIZERS[kind]
    assert tok.padding_side == "left" and tok.model_max_length == 128
    assert (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2)
    vocab = tok.get_vocab()
    assert len(vocab) == (18 if kind == "char" else 64)
    for token in vocab:  # bpe merges stay inside digit runs
        assert token.startswith("<") or len(token) == 1 or token.isdigit()
    assert tok("1a+", add_special_tokens=False)["input_ids"][1] == tok.unk_token_id
    batch = tok(["1+2=", "123+456="], padding=True, add_special_tokens=False)
    assert batch["attention_mask"][0][0] == 0 and batch["input_ids"][0][0] == tok.pad_token_id

    tok.save_pretrained(tmp_path)
    loaded = transformers.PreTrainedTokenizerFast.from_pretrained(tmp_path)
    assert loaded.get_vocab() == vocab and len(loaded) == len(tok)
    assert loaded.padding_side == "left" and loaded.model_max_length == 128
    assert loaded.all_special_tokens == tok.all_special_tokens
    assert (loaded.pad_token_id, loaded.eos_token_id, loaded.bos_token_id) == (0, 1, 1)
    texts = TASK.sample_texts(50, seed=9)
    assert loaded(texts)["input_ids"] == tok(texts)["input_ids"]
    assert [loaded.decode(tok(t)["input_ids"]) for t in texts] == texts


def test_kinds_differ_and_validation():
    char, bpe = (TOKENIZERS[k](TEXT)["input_ids"] for k in ("char", "bpe"))
    assert len(char) == len(TEXT) and len(bpe) < len(char)
    with pytest.raises(ValueError, match="kind"):
        build_tokenizer("word", ALPHABET)
    with pytest.raises(ValueError, match="corpus"):
        build_tokenizer("bpe", ALPHABET)


def tiny(arch: str, seed: int = 0) -> transformers.PreTrainedModel:
    kind = "bpe" if arch == "gpt2" else "char"
    return build_tiny_model(arch, TOKENIZERS[kind], hidden_size=32, num_layers=2, num_heads=4, seed=seed)


@pytest.mark.parametrize("arch", ARCHS)
def test_model_builds_forward_generate(arch):
    tok = TOKENIZERS["bpe" if arch == "gpt2" else "char"]
    model = tiny(arch)
    cfg = model.config
    assert not model.training and model.dtype == torch.float32 and cfg.vocab_size == len(tok)
    assert (cfg.pad_token_id, cfg.eos_token_id, cfg.bos_token_id) == (0, 1, 1)
    assert model.get_input_embeddings().weight is model.get_output_embeddings().weight
    drop = {k: v for k, v in cfg.to_dict().items() if ("drop" in k or "pdrop" in k) and isinstance(v, float)}
    assert drop and not any(drop.values()), drop
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), tiny(arch).parameters()))
    assert not torch.equal(model.get_input_embeddings().weight, tiny(arch, seed=1).get_input_embeddings().weight)

    with torch.random.fork_rng(devices=[]):  # large random weights, so greedy outputs vary between prompts
        torch.manual_seed(0)
        for p in model.parameters():
            p.data.normal_(0.0, 0.5)
    prompts = ["1+2=", "1234+5678=", "12*3="]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert model(**enc).logits.shape == (3, enc["input_ids"].shape[1], len(tok))
    out = model.generate(**enc, max_new_tokens=10, do_sample=False)
    batched = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    for prompt, text in zip(prompts, batched):  # left padding must not change any greedy continuation
        one = tok([prompt], return_tensors="pt", add_special_tokens=False)
        alone = model.generate(**one, max_new_tokens=10, do_sample=False)[0, one["input_ids"].shape[1] :]
        assert tok.decode(alone, skip_special_tokens=True) == text


def test_model_validation():
    with pytest.raises(ValueError, match="arch"):
        build_tiny_model("bert", TOKENIZERS["char"], 32, 2, 4)
    with pytest.raises(ValueError, match="hidden_size"):
        build_tiny_model("llama", TOKENIZERS["char"], 30, 2, 4)


def test_collate_masks_prompt_and_padding():
    batch = collate_right_padded([([5, 6], [7, 1]), ([5], [8, 9, 1])], pad_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 7, 1], [5, 8, 9, 1]]
    short = collate_right_padded([([5], [7, 1]), ([5, 6, 6], [8, 1])], pad_id=0)
    assert short["input_ids"].tolist() == [[5, 7, 1, 0, 0], [5, 6, 6, 8, 1]]
    assert short["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert short["labels"].tolist() == [[IGNORE_INDEX, 7, 1, IGNORE_INDEX, IGNORE_INDEX], [IGNORE_INDEX] * 3 + [8, 1]]


def test_warm_start_lowers_loss():
    model = tiny("opt")
    stats = supervised_warm_start(
        model, TOKENIZERS["char"], TASK.supervised_examples(200), steps=30, batch_size=16, progress=False
    )
    assert stats["steps"] == 30 and len(stats["losses"]) == 30 and stats["seconds"] > 0
    assert stats["final_loss"] < 0.7 * stats["initial_loss"]
    assert not model.training


def entries(cache: Path) -> list[Path]:
    """A warm-start cache's entries, without their lock files (.<hash>.lock)."""
    return [p for p in cache.iterdir() if not p.name.startswith(".")]


def test_cache_hit_identical_and_faster(tmp_path):
    key = {"arch": "gpt2", "hidden": 32, "layers": 2, "tokenizer": "bpe", "vocab": 64, "tiers": TASK.categories}
    calls = []

    def build():
        calls.append(1)
        return tiny("gpt2"), TOKENIZERS["bpe"]

    args = dict(cache_dir=tmp_path, key=key, steps=40, batch_size=16, progress=False)
    t0 = time.perf_counter()
    miss = warm_start_cached(build, lambda: TASK.supervised_examples(300), **args)
    t1 = time.perf_counter()
    hit = warm_start_cached(build, lambda: TASK.supervised_examples(300), **args)
    t2 = time.perf_counter()
    assert (miss.hit, hit.hit, len(calls)) == (False, True, 1)
    assert t2 - t1 < t1 - t0
    assert hit.path == miss.path and entries(tmp_path) == [miss.path]
    assert (miss.path / "model.safetensors").is_file()
    a, b = miss.model.state_dict(), hit.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert type(hit.model) is type(miss.model) and not hit.model.training
    assert hit.stats["final_loss"] == miss.stats["final_loss"]
    assert hit.tokenizer.get_vocab() == miss.tokenizer.get_vocab() and hit.tokenizer.padding_side == "left"
    enc = hit.tokenizer(["12+34="], return_tensors="pt", add_special_tokens=False)
    assert torch.equal(hit.model.generate(**enc, max_new_tokens=8), miss.model.generate(**enc, max_new_tokens=8))


def test_a_second_process_asking_for_an_entry_being_built_waits_and_reads_it(tmp_path):
    """Two callers at once (parallel jobs, test workers) train one warm start: the second waits on the entry's lock
    (a thread here: each opens the lock file on its own, as a process does), then loads what the first stored."""
    key = {"arch": "opt", "hidden": 32, "layers": 2, "tokenizer": "char", "tiers": TASK.categories}
    builds, results = [], {}

    def build():
        builds.append(1)
        time.sleep(0.5)  # the second caller asks while this one builds
        return tiny("opt"), TOKENIZERS["char"]

    def ask(name: str) -> None:
        results[name] = warm_start_cached(
            build, lambda: TASK.supervised_examples(50), tmp_path, key, steps=2, batch_size=8, progress=False
        )

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    time.sleep(0.2)
    ask("second")
    first.join()
    assert len(builds) == 1 and sorted(r.hit for r in results.values()) == [False, True]  # either may win
    assert results["first"].path == results["second"].path


def test_cache_key_changes_with_every_setting():
    key = {"arch": "opt", "hidden": 96, "tiers": ["add3"], "scratchpad": True}
    base = cache_key(key, 300, 64, 3e-3, 0)
    assert base == cache_key(dict(reversed(key.items())), 300, 64, 3e-3, 0) and len(base) == 64
    variants = [
        cache_key({**key, "hidden": 64}, 300, 64, 3e-3, 0),
        cache_key({**key, "scratchpad": False}, 300, 64, 3e-3, 0),
        cache_key({**key, "tiers": ["add4"]}, 300, 64, 3e-3, 0),
        cache_key(key, 301, 64, 3e-3, 0),
        cache_key(key, 300, 32, 3e-3, 0),
        cache_key(key, 300, 64, 1e-3, 0),
        cache_key(key, 300, 64, 3e-3, 1),
        cache_key(key, 300, 64, 3e-3, 0, warmup_steps=30),
    ]
    assert len({base, *variants}) == len(variants) + 1


ADD2 = ArithmeticTask(tiers=["add2"], eval_per_tier=20)


def target_run(target: float | None, steps: int, check_every: int = 20) -> tuple[dict, transformers.PreTrainedModel]:
    """A char OPT agent warm-started on add2 (lr 1e-2: ~0.3 held-out accuracy within ~100 steps), checked on the
    first 10 held-out problems."""
    model = build_tiny_model("opt", TOKENIZERS["char"], hidden_size=32, num_layers=2, num_heads=4, seed=0)
    problems = check_subset(ADD2.eval_problems(), 10)
    measure = partial(greedy_accuracy, problems=problems, grade=ADD2.grade, max_new_tokens=24)
    stop = None if target is None else AccuracyTarget(target, check_every, measure)
    examples = ADD2.supervised_examples(steps * 32)
    stats = supervised_warm_start(model, TOKENIZERS["char"], examples, steps, 32, 1e-2, progress=False, target=stop)
    return stats, model


def test_a_warm_start_stops_at_its_target_accuracy():
    stats, _ = target_run(0.3, steps=400)
    steps = [step for step, _ in stats["checks"]]
    assert steps == list(range(20, stats["steps_run"] + 1, 20)) and stats["steps_run"] < 400  # stopped at a check
    assert stats["heldout_accuracy"] >= 0.3 > max(a for _, a in stats["checks"][:-1])  # the first check at target
    assert len(stats["losses"]) == stats["steps_run"] and stats["steps"] == 400


def test_a_warm_start_that_misses_its_target_stops_at_the_cap_and_checking_changes_nothing(caplog):
    capped, model = target_run(1.0, steps=50)  # unreachable in 50 steps
    assert capped["steps_run"] == 50 and [s for s, _ in capped["checks"]] == [20, 40, 50]  # every 20, and the cap
    assert capped["heldout_accuracy"] < 1.0 and "below target 1" in caplog.text
    off, plain = target_run(None, steps=50)  # no target: today's warm start
    assert off["checks"] == [] and off["heldout_accuracy"] is None and off["steps_run"] == 50
    assert capped["losses"] == off["losses"]  # the greedy checks draw nothing and move nothing
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), plain.state_dict().values()))


def test_the_target_is_part_of_the_cache_key_and_its_metrics_come_back_from_the_cache(tmp_path):
    base = [*tiny_overrides("solo", 1), "algorithm=gspo", f"trainer.cache_dir={tmp_path}"]
    target = ["agents.members.opt_char.warm_start.target_accuracy=0.2", "agents.members.opt_char.warm_start.steps=300"]
    config = preflight([*base, *target, "agents.members.opt_char.warm_start.check_every=30"])
    task = build_task(config.task)
    _, _, metrics = warm_started_tiny_model(config.agents.members["opt_char"], task, config, 0)
    assert metrics["warm_start/validation_accuracy"] >= 0.2 and metrics["warm_start/steps_run"] % 30 == 0
    _, _, again = warm_started_tiny_model(config.agents.members["opt_char"], task, config, 0)  # a cache hit
    assert again == metrics and len(entries(tmp_path)) == 1
    other = preflight([*base, *target, "agents.members.opt_char.warm_start.check_every=60"])
    warm_started_tiny_model(other.agents.members["opt_char"], task, other, 0)
    seeded = preflight([*base, *target, "agents.members.opt_char.warm_start.check_every=30", "task.seed=5"])
    warm_started_tiny_model(seeded.agents.members["opt_char"], build_task(seeded.task), seeded, 0)
    assert len(entries(tmp_path)) == 3  # check_every and the data seed each name a new entry
