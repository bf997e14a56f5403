"""process_results functions of the hacrl_* lm-eval tasks (written by hacrl_exp.evaluation.lmeval)."""

from hacrl_exp.evaluation.lmeval import make_process_results

process_aime2025 = make_process_results("aime2025")
process_amc23 = make_process_results("amc23")
process_gsm8k = make_process_results("gsm8k")
process_math = make_process_results("math")
process_math500 = make_process_results("math500")
process_math500_sampled = make_process_results("math500_sampled")
process_minerva = make_process_results("minerva")
process_olympiadbench = make_process_results("olympiadbench")
