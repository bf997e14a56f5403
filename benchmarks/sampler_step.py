"""The sampling part of one decoding step, side by side: transformers' multinomial next to the counter sampler.

    python -m benchmarks.sampler_step [--rows 16] [--vocab 151936] [--repeats 200] [--smoke] [--out PATH]

What `generate` does with one step's float32 logits (B, V) after the forward, on one torch thread:
  - multinomial (rollout.sampler=multinomial, the default before issue 36): the warpers, softmax,
    `torch.multinomial(probs, 1)` (transformers' `_sample` with do_sample=True);
  - counter (rollout.sampler=counter, `hacrl_exp.rollout.hf.CounterSampler`): the uniforms of (call seed, row, step)
    from the splitmix64 hash, the warpers, float64 softmax, cumulative sum and search, the one-hot scores, then
    `generate`'s argmax (do_sample=False takes the drawn token).
Each repeat times one step of each, alternating, so both see the same machine load; the table gives the median and
the 10th/90th percentiles in ms, and counter / multinomial of the medians. Rows: the default sampling (temperature 1,
no top-k or top-p: no warpers) and a warped one (temperature 0.7, top-k 50, top-p 0.9), whose top-p sorts the
vocabulary in both.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.common import percentile, print_table, write_json
from benchmarks.harness import RESULTS, machine
from hacrl_exp.rollout.base import SamplingSettings
from hacrl_exp.rollout.hf import CounterSampler, sampling_warpers

SETTINGS = {
    "default (T 1)": SamplingSettings(temperature=1.0),
    "warped (T 0.7, top-k 50, top-p 0.9)": SamplingSettings(temperature=0.7, top_k=50, top_p=0.9),
}


def multinomial_step(warpers, ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """transformers' `_sample` with do_sample=True: warpers, softmax, one multinomial draw per row."""
    probs = torch.softmax(warpers(ids, logits.clone()), dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(1)


def counter_step(sampler: CounterSampler, ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """transformers' `_sample` with do_sample=False and the counter sampler as its logits processor."""
    return sampler(ids, logits.clone()).argmax(dim=-1)


def measure(sampling: SamplingSettings, rows: int, vocab: int, repeats: int) -> dict[str, list[float]]:
    """Seconds per step of each sampler, `repeats` alternating pairs after one warm-up pair."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn((rows, vocab), generator=generator) * 3
    ids = torch.zeros((rows, 1), dtype=torch.long)
    warpers = sampling_warpers(sampling)
    sampler = CounterSampler(12345, torch.arange(rows, dtype=torch.int64), sampling)
    steps = {
        "multinomial": lambda: multinomial_step(warpers, ids, logits),
        "counter": lambda: counter_step(sampler, ids, logits),
    }
    times: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(repeats + 1):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            if repeat:  # the first pair warms up
                times[name].append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--smoke", action="store_true", help="a seconds-long run: 5 repeats, vocabulary 4096")
    parser.add_argument("--out", default=str(RESULTS / "sampler_step.json"))
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.vocab = 5, 4096
    torch.set_num_threads(1)
    table, results = [], {}
    for label, sampling in SETTINGS.items():
        times = measure(sampling, args.rows, args.vocab, args.repeats)
        ms = {name: [t * 1e3 for t in values] for name, values in times.items()}
        medians = {name: statistics.median(values) for name, values in ms.items()}
        results[label] = {name: {"median_ms": medians[name], "p10_ms": percentile(v, 0.1), "p90_ms": percentile(v, 0.9)}
                          for name, v in ms.items()}  # fmt: skip
        for name, values in ms.items():
            table.append([label, name, medians[name], percentile(values, 0.1), percentile(values, 0.9)])
        table.append([label, "counter / multinomial", medians["counter"] / medians["multinomial"], "", ""])
    title = f"Sampling cost per decoding step: B = {args.rows}, V = {args.vocab:,}, 1 thread, {args.repeats} repeats"
    print_table(["sampling", "sampler", "median ms", "p10 ms", "p90 ms"], table, title)
    write_json(args.out, {"rows": args.rows, "vocab": args.vocab, "repeats": args.repeats, "machine": machine(),
                          "results": results})  # fmt: skip


if __name__ == "__main__":
    main()
