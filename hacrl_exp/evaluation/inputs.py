"""The inputs of `python -m hacrl_exp.evaluate`, checked after its schema and before any model loads.

Benchmark names, the data folder, the checkpoints, the output folder and the tracking store: file-system checks only,
so a typo never waits for torch to import. Every error is one ConfigError line naming the key, the value and the fix.
"""

from __future__ import annotations

from hacrl_exp.config.evaluate_schema import EvaluateConfig
from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.checkpoints import resolve_checkpoints
from hacrl_exp.evaluation.spec import load_benchmark
from hacrl_exp.paths import check_output
from hacrl_exp.tasks.problem_data import data_folder
from hacrl_exp.tracking.store import check_store


def check_inputs(config: EvaluateConfig) -> None:
    """Benchmarks known, data folder present, checkpoints resolvable, samples > 1 only with sampling."""
    if not config.benchmarks:
        raise ConfigError("benchmarks is empty; name at least one, e.g. benchmarks=[math500]")
    for i, name in enumerate(config.benchmarks):
        try:
            spec = load_benchmark(name)
        except ConfigError as exc:
            raise ConfigError(f"benchmarks[{i}]: {exc}") from None
        samples = config.samples or spec.generation.samples
        temperature = (
            spec.generation.temperature if config.sampling.temperature is None else config.sampling.temperature
        )
        if samples > 1 and temperature == 0:
            raise ConfigError(
                f"benchmark {name}: samples={samples} with temperature 0 (greedy) repeats one answer; "
                "set sampling.temperature > 0 or samples=1"
            )
    if config.data_dir is not None:
        data_folder(config.data_dir)
    resolve_checkpoints(config.checkpoints, config.agents)
    if config.output_dir is not None:  # not a file or device, a symlink only with --follow-symlinks, writable
        check_output(config.output_dir, "output_dir")
    check_store(config.tracking)  # at most 10 s, one line naming tracking.uri or MLFLOW_TRACKING_URI
