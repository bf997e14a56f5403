"""One Optuna study per directed edge learner←source, so α[k←j] and α[j←k] are tuned separately.

The studies are named `<study_name>/<learner><-<source>` and share one storage. A sweep trial asks every edge
study for its α, runs one training job with all of them, and tells each study its learner's final held-out
metric (or PRUNED with the last reported value) and, as the trial's user attribute `heldout_problems`, the number
of held-out problems behind it. The study's user attributes carry what the job needs to report to it (learner,
metric, pruner), so a job needs only the storage URL, the study names and its trial numbers.

An edge has a best α only when its COMPLETE trials separate beyond their noise (hacrl_exp.evaluation.separation:
the top trial ahead of the runner-up by more than one binomial standard error); else the sweep says "no best α"
with the spread, and best_alpha/<study>.yaml sets no α for that edge (and is not written while no edge separates).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import optuna
from omegaconf import OmegaConf
from optuna.trial import FrozenTrial, TrialState

from hacrl_exp.errors import ConfigError
from hacrl_exp.evaluation.separation import Separation, effective_problems, separate_best
from hacrl_exp.graph import Edge
from hacrl_exp.paths import lock_holder, locked, replace_atomic, take_lock
from hacrl_exp.sweep.settings import SweepSettings, make_pruner

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def edge_name(edge: Edge) -> str:
    return f"{edge.learner}<-{edge.source}"


def metric_of(evals: dict, learner: str, metric: str) -> float:
    """The learner's held-out `metric` in one evaluation ({agent: {metric: value}})."""
    if metric not in evals[learner]:
        known = sorted(evals[learner])
        raise ConfigError(f"hydra.sweeper.metric={metric!r} is not a held-out metric of the run; known: {known}")
    return float(evals[learner][metric])


def trial_id(storage: optuna.storages.BaseStorage, study_name: str, number: int) -> int:
    """The storage-wide id of a study's trial number."""
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study_name), number)


def sqlite_file(url: str) -> Path | None:
    """The database file of a sqlite storage URL, else None."""
    return Path(url.removeprefix("sqlite:///")).absolute() if url.startswith("sqlite:///") else None


@functools.cache
def storage_for(url: str) -> optuna.storages.BaseStorage:
    """One storage object per URL and process (the sweeper and an in-process job share it). A new sqlite storage is
    created (its schema migrated) under `<db>.lock`, so two processes never migrate it at once."""
    db = sqlite_file(url)
    if db is None:
        return optuna.storages.get_storage(url)
    db.parent.mkdir(parents=True, exist_ok=True)
    with locked(db.with_name(db.name + ".lock")):
        return optuna.storages.get_storage(url)


def study_lock_path(settings: SweepSettings) -> Path:
    """The lock file of a study: beside its sqlite storage (`<db>.<study>.lock`), else in the sweep's output folder
    (a server storage: then only sweeps on this machine see it)."""
    db = sqlite_file(settings.storage)
    folder, prefix = (db.parent, f"{db.name}.") if db is not None else (settings.output_dir, "")
    return folder / f"{prefix}{settings.study_name}.lock"


def lock_study(settings: SweepSettings) -> int:
    """Take the study's lock for this process (one sweep per study at a time: a second would take the first's live
    trials for a killed sweep's); a ConfigError naming the study and the holder's pid when another process has it.
    Returns the descriptor to close when the sweep ends (the kernel drops the lock if the process dies)."""
    path = study_lock_path(settings)
    fd = take_lock(path)
    if fd is None:
        raise ConfigError(
            f"study {settings.study_name} ({settings.storage}) is being run by process {lock_holder(path)} "
            f"(it holds {path}); wait for it to end, or give another hydra.sweeper.study_name"
        )
    return fd


@dataclass
class AskedTrial:
    """One sweep trial: an Optuna trial in every edge study, and the α each asked for."""

    trials: dict[Edge, optuna.Trial]
    alphas: dict[Edge, float]

    @property
    def number(self) -> int:
        return next(iter(self.trials.values())).number

    def overrides(self, storage: str) -> list[str]:
        """The job's Hydra overrides: α per edge, and the trials it reports to (config.trial)."""
        out = [f"++agents.members.{e.learner}.alpha_from.{e.source}={a!r}" for e, a in self.alphas.items()]
        studies = ",".join(repr(t.study.study_name) for t in self.trials.values())
        numbers = ",".join(str(t.number) for t in self.trials.values())
        return [*out, f"trial.storage={storage!r}", f"trial.studies=[{studies}]", f"trial.numbers=[{numbers}]"]


class EdgeStudies:
    """The per-edge studies of one sweep."""

    def __init__(self, settings: SweepSettings, edges: list[Edge]) -> None:
        self.settings = settings
        self.storage = storage = storage_for(settings.storage)
        self.studies: dict[Edge, optuna.Study] = {}
        for edge in edges:
            study = optuna.create_study(
                study_name=f"{settings.study_name}/{edge_name(edge)}",
                storage=storage,
                direction=settings.direction,
                pruner=make_pruner(settings.pruner),
                load_if_exists=True,
            )
            attrs = {"sweep": settings.study_name, "learner": edge.learner, "source": edge.source}
            attrs |= {"metric": settings.metric, "pruner": settings.pruner}
            for key, value in attrs.items():
                study.set_user_attr(key, value)
            self.studies[edge] = study

    def fail_stale(self) -> list[tuple[str, int]]:
        """Mark FAIL every trial left RUNNING: its sweep process was killed (one sweeper per study at a time: the caller
        holds the study's lock, `lock_study`, so no live sweep owns a RUNNING trial).
        They are tagged interrupted=True, so the next trial reuses their sampler seed, hence their α.
        Returns (edge study name, trial number) of each."""
        failed = []
        for study in self.studies.values():
            for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
                stale = trial_id(self.storage, study.study_name, trial.number)
                self.storage.set_trial_user_attr(stale, "interrupted", True)
                study.tell(trial.number, state=TrialState.FAIL)
                failed.append((study.study_name, trial.number))
        return failed

    def finished(self) -> int:
        """Trials that count towards n_trials: COMPLETE or PRUNED, in the edge study that has the fewest."""
        return min(len(s.get_trials(deepcopy=False, states=FINISHED)) for s in self.studies.values())

    def ask(self) -> AskedTrial:
        distribution = self.settings.alpha.distribution()
        trials, alphas = {}, {}
        for index, (edge, study) in enumerate(self.studies.items()):
            ordinal = sum(not t.user_attrs.get("interrupted") for t in study.get_trials(deepcopy=False))
            study.sampler = self.settings.make_sampler(index, ordinal)
            trials[edge] = study.ask({"alpha": distribution})
            alphas[edge] = float(trials[edge].params["alpha"])
        return AskedTrial(trials, alphas)

    def tell(self, asked: AskedTrial, summary: dict | None) -> str:
        """Finish the trial in every edge study from the job's summary (None: the job failed); returns the state."""
        if summary is None:
            for edge, trial in asked.trials.items():
                self.studies[edge].tell(trial, state=TrialState.FAIL)
            return "FAIL"
        problems = effective_problems(summary.get("heldout_problems", {}), self.settings.metric)
        for edge, trial in asked.trials.items():
            trial.set_user_attr("output_dir", summary["output_dir"])
            trial.set_user_attr("mlflow_run_id", summary["run_ids"].get("", ""))
            trial.set_user_attr("heldout_problems", problems)
            if summary["stopped_early"] is not None:
                self.studies[edge].tell(trial, state=TrialState.PRUNED)
            else:
                value = metric_of(summary["evals"][summary["last_step"]], edge.learner, self.settings.metric)
                self.studies[edge].tell(trial, value)  # a NaN value makes Optuna mark it FAIL
        return "PRUNED" if summary["stopped_early"] is not None else "COMPLETE"

    def fail(self, asked: list[AskedTrial]) -> None:
        """Mark FAIL (interrupted) the trials of an interrupted batch that are still running."""
        for one in asked:
            for edge, trial in one.trials.items():
                frozen = self.storage.get_trial(trial_id(self.storage, trial.study.study_name, trial.number))
                if not frozen.state.is_finished():
                    trial.set_user_attr("interrupted", True)
                    self.studies[edge].tell(trial, state=TrialState.FAIL)

    def separations(self) -> dict[Edge, tuple[list[FrozenTrial], Separation]]:
        """Each edge study's COMPLETE trials and whether they separate (hacrl_exp.evaluation.separation)."""
        out = {}
        for edge, study in self.studies.items():
            done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            problems = next((t.user_attrs["heldout_problems"] for t in done if t.user_attrs.get("heldout_problems")), 0)
            maximize = self.settings.direction == "maximize"
            out[edge] = done, separate_best([t.value for t in done], problems, maximize)
        return out

    def best(self) -> dict[Edge, FrozenTrial | None]:
        """Each edge study's winning COMPLETE trial; None while its trials do not separate (or it has none)."""
        return {e: None if s.best is None else done[s.best] for e, (done, s) in self.separations().items()}

    def write_best(self) -> Path | None:
        """Write best_alpha/<study>.yaml under the output folder, atomically, once any edge's trials separate: a
        Hydra config a later run includes. It sets α only for the edges whose trials separate; the others are named
        in its header with "no best α" and keep the run's α. While no edge separates there is no file (one written
        after an earlier trial is removed, so no stale α is included) and it returns None."""
        found = {e: v for e, v in self.separations().items() if v[0]}
        name, folder = self.settings.study_name, self.settings.output_dir
        path = folder / "best_alpha" / f"{name}.yaml"
        if not any(separation.separated for _, separation in found.values()):
            path.unlink(missing_ok=True)
            return None
        members: dict = {}
        for edge, (done, separation) in found.items():
            if separation.best is not None:
                alpha = done[separation.best].params["alpha"]
                members.setdefault(edge.learner, {"alpha_from": {}})["alpha_from"][edge.source] = alpha
        header = [
            "# @package _global_",
            f"# Best α per edge of the Optuna study {name!r} ({self.settings.storage}).",
            f"# An edge's α is that of the trial where its learner scored the best final {self.settings.metric}, when",
            "# that trial is ahead of the runner-up by more than one binomial standard error; the edges were tuned",
            "# independently. Include it in a run with:",
            f"#   python -m hacrl_exp.run --config-dir {folder} +best_alpha={name}",
            *(f"#   {edge_name(e)}: {verdict(done, s)}" for e, (done, s) in found.items()),
        ]
        body = OmegaConf.to_yaml({"agents": {"members": members}})
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomic(path, lambda tmp: tmp.write_text("\n".join(header) + "\n" + body))  # a regular file only
        return path

    def table(self) -> str:
        """Per edge: the best α with its value and trial, or "none"; the spread of its COMPLETE trials' values, how
        many there are (the trials behind the verdict), and the state counts of its study."""
        head = f"{'edge':<28} {'best α':>8} {self.settings.metric:>14} {'trial':>6} {'spread':>7} {'n':>3}"
        rows = [head + "  complete/pruned/failed"]
        for edge, (done, separation) in self.separations().items():
            counts = [len(self.studies[edge].get_trials(deepcopy=False, states=(s,))) for s in COUNTED]
            states = "/".join(str(c) for c in counts)
            spread = "-" if not done else f"{separation.spread:.4f}"
            if separation.best is None:
                top = "-" if separation.top is None else f"{done[separation.top].value:.4f}"
                line = f"{edge_name(edge):<28} {'none':>8} {top:>14} {'-':>6} {spread:>7} {len(done):>3}  {states}"
                rows.append(line + (f"  no best α: {separation.reason()}" if done else ""))
            else:
                trial = done[separation.best]
                alpha, value = trial.params["alpha"], trial.value
                rows.append(
                    f"{edge_name(edge):<28} {alpha:>8.4g} {value:>14.4f} {trial.number:>6} {spread:>7} {len(done):>3}"
                    f"  {states}"
                )
        return "\n".join(rows)


def verdict(done: list[FrozenTrial], separation: Separation) -> str:
    """'α=1.5, 0.4200 (trial 3; +0.0300 over the runner-up, noise 0.0150)' or 'no best α (…, spread …)'."""
    if separation.best is None:
        return f"no best α ({separation.reason()}; spread {separation.spread:.4f} over {separation.trials} trials)"
    trial = done[separation.best]
    return (
        f"α={trial.params['alpha']:.4g}, {trial.value:.4f} (trial {trial.number}; {separation.gap:+.4f} over the "
        f"runner-up, noise {separation.noise:.4f}, {separation.trials} trials)"
    )
