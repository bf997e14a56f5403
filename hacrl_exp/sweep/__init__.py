"""α sweeps with Optuna: one study per directed edge, pruning on the held-out metric (docs/sweeps.md).

The Hydra plugin is `hydra_plugins/hacrl_optuna_sweeper` (`hydra/sweeper=hacrl_optuna`); this package holds
what it and the trial jobs share: settings, the edge studies, and the job-side pruning hook.
"""
