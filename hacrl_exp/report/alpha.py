"""α response curves from the Optuna studies of an α sweep (hacrl_exp.sweep: one study per directed edge,
named `<sweep>/<learner><-<source>`, parameter `alpha`, objective = the learner's final held-out metric).

An edge's best α is named only when its COMPLETE trials separate beyond their noise, by the sweep's own rule
(hacrl_exp.evaluation.separation): else the best-α table says "no best α" and gives the spread."""

from __future__ import annotations

import math

import pandas as pd

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.separation import separate_best

COLUMNS = [
    "sweep", "study", "learner", "source", "trial", "state", "alpha", "value", "metric", "direction", "heldout_problems"
]  # fmt: skip
BEST_COLUMNS = [
    "study", "learner", "source", "alpha", "value", "trials", "complete", "spread", "gap", "noise", "verdict"
]  # fmt: skip
NO_BEST = "no best α"


def split_study_name(name: str) -> tuple[str, str, str]:
    """'<sweep>/<learner><-<source>' → (sweep, learner, source); other names → (name, '', '')."""
    sweep, _, edge = name.rpartition("/")
    learner, arrow, source = edge.partition("<-")
    return (sweep, learner, source) if sweep and arrow else (name, "", "")


def load_alpha_trials(storage: str, sweeps: list[str] | None = None, param: str = "alpha") -> pd.DataFrame:
    """One row per trial of every edge study in `storage` (only sweeps named in `sweeps`, when given)."""
    import optuna

    try:
        names = optuna.get_all_study_names(storage)
    except Exception as exc:  # a wrong URL or a file that is not an Optuna storage
        raise ConfigError(f"studies.storage={storage!r} could not be read as an Optuna storage ({exc})") from None
    rows = []
    for name in sorted(names):
        sweep, learner, source = split_study_name(name)
        if sweeps and sweep not in sweeps:
            continue
        study = optuna.load_study(study_name=name, storage=storage)
        attrs = study.user_attrs
        learner, source = attrs.get("learner", learner), attrs.get("source", source)
        for trial in study.get_trials(deepcopy=False):
            if param not in trial.params:
                continue
            value = trial.value if trial.value is not None else (trial.intermediate_values or {}).get(trial.last_step)
            rows.append(
                (sweep, name, learner, source, trial.number, trial.state.name, trial.params[param], value,
                 attrs.get("metric", "objective"), study.direction.name.lower(),
                 trial.user_attrs.get("heldout_problems"))
            )  # fmt: skip
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if sweeps and frame.empty:
        raise ConfigError(f"studies.sweeps={sweeps}: no study of these sweeps with a {param!r} parameter in {storage}")
    return frame


def best_alpha(trials: pd.DataFrame) -> pd.DataFrame:
    """Per edge study, the verdict on its COMPLETE trials (hacrl_exp.evaluation.separation):
    alpha, value  the winner's α and value; α is NaN when the trials do not separate (value: the top trial's)
    trials        trials of the study in any state; complete: the COMPLETE ones behind the verdict
    spread        max − min of their values; gap: top − runner-up; noise: one standard error of the gap
    verdict       "best α", or "no best α: <reason>"
    """
    done = trials[trials["state"] == "COMPLETE"].dropna(subset=["value"])
    if done.empty:
        return pd.DataFrame(columns=BEST_COLUMNS)
    counts = trials.groupby("study")["trial"].count()
    rows = []
    for study, part in done.groupby("study", sort=True):
        part = part.sort_values("trial")
        problems = part["heldout_problems"].dropna() if "heldout_problems" in part else pd.Series(dtype=float)
        found = separate_best(part["value"].tolist(), problems.iloc[0] if len(problems) else None,
                              part["direction"].iloc[0] != "minimize")  # fmt: skip
        top = part.iloc[found.top]
        alpha = float(top["alpha"]) if found.separated else math.nan
        verdict = "best α" if found.separated else f"{NO_BEST}: {found.reason()}"
        rows.append((study, top["learner"], top["source"], alpha, float(top["value"]), int(counts[study]), len(part),
                     found.spread, found.gap, found.noise, verdict))  # fmt: skip
    return pd.DataFrame(rows, columns=BEST_COLUMNS)
