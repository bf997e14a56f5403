"""α response curves from the Optuna studies of an α sweep (hacrl_exp.sweep: one study per directed edge,
named `<sweep>/<learner><-<source>`, parameter `alpha`, objective = the learner's final held-out metric)."""

from __future__ import annotations

import pandas as pd

from hacrl_exp.errors import ConfigError

COLUMNS = ["sweep", "study", "learner", "source", "trial", "state", "alpha", "value", "metric", "direction"]


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
                 attrs.get("metric", "objective"), study.direction.name.lower())
            )  # fmt: skip
    frame = pd.DataFrame(rows, columns=COLUMNS)
    if sweeps and frame.empty:
        raise ConfigError(f"studies.sweeps={sweeps}: no study of these sweeps with a {param!r} parameter in {storage}")
    return frame


def best_alpha(trials: pd.DataFrame) -> pd.DataFrame:
    """Per edge study: the COMPLETE trial with the best objective (in the study's direction), and its trial count."""
    done = trials[trials["state"] == "COMPLETE"].dropna(subset=["value"])
    if done.empty:
        return pd.DataFrame(columns=["study", "learner", "source", "alpha", "value", "trials"])
    signed = done["value"].where(done["direction"] != "minimize", -done["value"])
    best_index = signed.groupby(done["study"]).idxmax()
    best = done.loc[best_index, ["study", "learner", "source", "alpha", "value"]]
    counts = trials.groupby("study")["trial"].count().rename("trials")
    return best.join(counts, on="study").reset_index(drop=True)
