"""hacrl_exp: Heterogeneous Agent Collaborative RL (HACRL) experiments.

The algorithm library (`hacrl_exp.algo`) holds the HACPO / GSPO / GRPO math as pure tensor
functions; `hacrl_exp.theory` checks the paper's theory numerically. Importing the package
touches neither the network nor the disk.
"""

__version__ = "0.1.0"
