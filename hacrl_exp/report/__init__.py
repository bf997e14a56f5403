"""Comparison reports of training runs (`python -m hacrl_exp.report`; docs/reports.md).

load (MLflow → pandas) → tables, costs, seeds (numbers) + stats, power (pure statistics) → rules, paper (margins and
hypothesised effects) → compare (paired tests, Holm per family) → claims (the paper's hypotheses) → text, headline,
render (Markdown, HTML) + plots (PNG) → sections, build (the folder) + folder (where it goes, replaced only when a
report made it).
"""
