"""The repository's top-level `sweeps/` folder as Hydra's config groups `hparams_search` and `sweep` (the α studies).

Hydra imports every module of hydra_plugins at startup, so these modules import nothing heavy at the top.
"""
