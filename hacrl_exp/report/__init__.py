"""Comparison reports of training runs (`python -m hacrl_exp.report`; docs/reports.md).

load (MLflow → pandas) → tables, costs, seeds (numbers) + stats, power (pure statistics) → rules, paper (margins and
hypothesised effects) → compare (paired tests, Holm per family) → claims (the paper's hypotheses) → text, headline,
opening (the bottom line and the claims block, from the tables), render (Markdown, HTML) + plots (PNG) → sections,
layout (the page: opening, contents, anchors), build (the folder) + folder (where it goes, replaced only when a report
made it). relayout lays a published report out again from its own files; serve is the reports server of
`python -m hacrl_exp.ui` (an index at `/`, UTF-8 text).
"""
