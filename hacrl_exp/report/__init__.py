"""Comparison reports of training runs (`python -m hacrl_exp.report`; docs/reports.md).

load (MLflow → pandas) → tables (numbers) + stats (pure statistics) → plots (PNG) → render (Markdown, HTML) → build.
"""
