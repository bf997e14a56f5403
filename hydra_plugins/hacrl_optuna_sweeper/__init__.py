"""hacrl_exp's Optuna sweeper for Hydra (`hydra/sweeper=hacrl_optuna`), written against Optuna >= 4.

Hydra imports every module of hydra_plugins at startup, so these modules import nothing heavy at the top.
"""
