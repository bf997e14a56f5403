"""`python -m benchmarks`: the whole performance suite (benchmarks/run_all.py)."""

from benchmarks.run_all import main

main()
