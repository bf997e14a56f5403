"""hacrl_exp's Ray launcher for Hydra (`hydra/launcher=hacrl_ray`): every job of a multirun is a Ray task.

Hydra imports every module of hydra_plugins at startup, so these modules import nothing heavy at the top.
"""
