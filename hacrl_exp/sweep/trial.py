"""The job side of an α-sweep trial: MLflow tags, and reports to the edge studies for pruning.

Pruning rule: after every evaluation (but the first and the last), each edge study's trial gets its learner's
held-out metric as an intermediate value at that step; the run stops when *every* edge study's pruner says
prune, since all edges share one training run. The sweeper then marks the trial PRUNED in every edge study.
"""

from __future__ import annotations

from collections.abc import Callable

from hacrl_exp.config.schema import Config


def join_trial(config: Config) -> Callable[[int, dict], bool] | None:
    """For a job launched by the hacrl_optuna sweeper (config.trial set): add the MLflow tags study, trial and
    alpha/<learner>_from_<source> to config.tracking.tags, and return the on_evaluate hook of
    `hacrl_exp.trainer.loop.train` that reports to the edge studies. None outside a sweep."""
    if not config.trial.studies:
        return None
    import optuna

    from hacrl_exp.sweep.settings import make_pruner
    from hacrl_exp.sweep.studies import metric_of, storage_for, trial_id

    storage = storage_for(config.trial.storage)
    reporters = []
    for name, number in zip(config.trial.studies, config.trial.numbers, strict=True):
        attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(name))
        study = optuna.load_study(
            study_name=name,
            storage=storage,
            sampler=optuna.samplers.RandomSampler(),  # never samples here; avoids building a TPE sampler
            pruner=make_pruner(attrs["pruner"]),
        )
        trial = optuna.Trial(study, trial_id(storage, name, number))
        reporters.append((attrs, trial))
        alpha = storage.get_trial_params(trial_id(storage, name, number))["alpha"]
        config.tracking.tags[f"alpha/{attrs['learner']}_from_{attrs['source']}"] = f"{alpha:.6g}"
    config.tracking.tags.update({"study": reporters[0][0]["sweep"], "trial": str(config.trial.numbers[0])})

    def on_evaluate(step: int, evals: dict) -> bool:
        prune = True
        for attrs, trial in reporters:
            trial.report(metric_of(evals, attrs["learner"], attrs["metric"]), step)
            prune = trial.should_prune() and prune  # report to every study before deciding
        return prune

    return on_evaluate
