"""How a plain `pytest` spreads the suite over pytest-xdist workers (the hooks are in tests/conftest.py).

- WORKERS workers (CI's two cores), each computing on its share of the cores (one torch thread each there).
- Tests are handed out one at a time in the order of `order` (each worker sorts its collection alike): the longest
  first (LONGEST), then the other slow ones, so that the last to finish are short ones. The tests of one GROUPS entry
  go to one worker together, where the first of them stands: they share a costly module or session fixture (built
  once, not once per worker) or must not run side by side (private Ray clusters).
  This is xdist's `--dist loadgroup` keyed by file, done here because loadgroup reads its marks into the test ids,
  which pytest 9.2 no longer lets a plugin change (pytest-dev/pytest-xdist#1386: the marks are silently ignored).
- `-n 0` or `-p no:xdist` runs in one process; so does a plain `pytest <file or folder>` (both workers would pay the
  imports and the collection for it), unless `-n N` asks; `--dist <mode>` picks xdist's own scheduling.
"""

from __future__ import annotations

import os

WORKERS = 2
"""pytest-xdist workers of a plain `pytest` (the whole suite)."""

GROUPS = {
    "tests/benchmarks/test_gpu_check.py": "gpu_check",  # a module-scoped gpu_check of every row
    "tests/e2e/test_glance.py": "glance",  # a module-scoped multirun
    "tests/evaluation/test_checkpoints.py": "tiny_run",  # tiny_run, session-scoped (tests/evaluation/conftest.py)
    "tests/evaluation/test_end_to_end.py": "tiny_run",
    "tests/report/test_report.py": "report_store",  # a module-scoped store of eight tiny runs
    "tests/report/test_inference.py": "synthetic_reports",  # the session-scoped reports of tests/report/conftest.py
    "tests/report/test_layout.py": "synthetic_reports",
    "tests/report/test_opening.py": "synthetic_reports",
    "tests/report/test_rederive.py": "synthetic_reports",
    "tests/reliability/test_run_integrity.py": "run_integrity",  # a module-scoped finished run
    "tests/reliability/test_resume_history.py": "resume_history",  # a module-scoped finished run
    "tests/reliability/test_secrets_everywhere.py": "secrets",  # a module-scoped run with planted secrets
    "tests/trainer/test_fsdp.py": "ray",  # one private Ray cluster at a time
    "tests/trainer/test_ray.py": "ray",
    "tests/trainer/test_shared_placement.py": "ray",  # two module-scoped runs, one of them on a private Ray
}
"""Test files whose tests run on one worker, by group name (paths from the repository root)."""


LONGEST = (
    "tests/reliability/test_crash_resume.py::test_killed_five_times",  # five killed processes and their restarts
    "tests/trainer/test_fsdp.py",  # the "ray" group
    "tests/trainer/test_ray.py",
    "tests/trainer/test_shared_placement.py",
    "tests/benchmarks/test_entry_points.py::test_every_entry_point_runs_in_smoke_mode",
    "tests/e2e/test_cli.py::test_parallel_jobs_share_a_new_mlflow_store",
    "tests/reliability/test_resources.py::test_long_run_keeps_memory_flat",
    "tests/rehearsal/test_rehearse.py::test_a_paper_preset_rehearses_end_to_end",
    "tests/benchmarks/test_gpu_check.py",
    "tests/reliability/test_signals_and_locks.py::test_sigterm_checkpoints",
    "tests/reliability/test_run_integrity.py",
    "tests/reliability/test_resume_history.py",
    "tests/reliability/test_secrets_everywhere.py",
    "tests/report/test_report.py",
    "tests/ui/test_ui_check.py",  # two tiny jobs, a report, the MLflow server and Chromium
)
"""Node-id prefixes of the longest tests, longest first (measured on the shared 2-core machine)."""


SLOW = (
    "tests/agents/test_logprobs.py::test_chunked_path_never_holds_the_micro_batch_logits",
    "tests/agents/test_memory_plan.py::test_exact_parts_equal_the_tiny_agents_allocation",
    "tests/agents/test_memory_plan.py::test_planner_predicts_the_measured_update_peak_on_cpu",
    "tests/agents/test_memory_plan.py::test_suggestions_each_fit",
    "tests/agents/test_rendezvous.py::test_two_ranks_meet_on_a_non_loopback_address",
    "tests/agents/test_sharding.py::test_two_ranks_gather_the_full_weights_and_split_generation_exactly",
    "tests/agents/test_tiny.py::test_a_warm_start_stops_at_its_target_accuracy",
    "tests/agents/test_tiny.py::test_a_warm_start_that_misses_its_target_stops_at_the_cap",
    "tests/agents/test_tiny.py::test_the_target_is_part_of_the_cache_key",
    "tests/algo/test_logged_applied.py::test_the_logged_weight_and_window_are_the_gradients",
    "tests/benchmarks/test_entry_points.py::test_every_entry_point_runs_in_smoke_mode",
    "tests/benchmarks/test_gpu_check.py",
    "tests/benchmarks/test_grader_accuracy.py::test_command_grades_a_small_set",
    "tests/benchmarks/test_grader_accuracy.py::test_outside_command_prints_the_table_and_every_disagreement",
    "tests/benchmarks/test_trl_equivalence.py::test_loss_and_gradient_equal_trl_with_trl_epsilon",
    "tests/config/test_config.py::test_bad_input_exits_2_with_one_line",
    "tests/config/test_config.py::test_every_group_option_composes",
    "tests/config/test_experiment_presets.py::test_gap_regime_is_the_pair_warm_started_to_target_accuracies",
    "tests/config/test_experiment_presets.py::test_table1_tiny_10seeds_is_the_grid",
    "tests/e2e/",
    "tests/evaluation/test_gold.py::test_olympiadbench_rows_that_need_benchmark_specific_extraction",
    "tests/evaluation/test_lmeval.py::test_export_runs_in_the_real_lm_eval_command",
    "tests/gpu/test_gpu_options_run.py",
    "tests/rehearsal/test_rehearse.py::test_a_bad_preset_fails_in_one_line_before_any_model",
    "tests/rehearsal/test_rehearse.py::test_a_paper_preset_rehearses_end_to_end",
    "tests/rehearsal/test_rehearse.py::test_every_other_preset_renders_retokenises_builds_and_plans",
    "tests/rehearsal/test_tokens.py::test_an_answer_that_ends_its_turn_is_cut_there",
    "tests/rehearsal/test_tokens.py::test_each_checkpoint_stops_at_its_own_stop_tokens",
    "tests/rehearsal/test_tokens.py::test_qwen3_and_llama3_round_trip_every_math500_gold_solution",
    "tests/rehearsal/test_tokens.py::test_round_trip_of_what_responses_hold_and_the_rows_that_change",
    "tests/reliability/test_bad_data.py::test_skip_mode_reports_the_count_in_the_run",
    "tests/reliability/test_crash_resume.py::test_killed_five_times",
    "tests/reliability/test_errors_first.py::test_a_store_locked_mid_run_buffers_and_loses_nothing",
    "tests/reliability/test_entry_point_paths.py::test_ui_writes_its_server_log_into_a_private_folder",
    "tests/reliability/test_full_disk.py::test_a_checkpoints_folder_made_read_only_mid_run",
    "tests/reliability/test_full_disk.py::test_a_disk_full_while_a_checkpoint_is_written",
    "tests/reliability/test_full_disk.py::test_a_full_disk_at_a_checkpoint",
    "tests/reliability/test_full_disk.py::test_a_store_that_fills_up",
    "tests/reliability/test_bounded_input.py::test_a_huge_training_row_is_refused",
    "tests/reliability/test_bounded_input.py::test_threads_above_the_cores_warn",
    "tests/reliability/test_hangup_and_sweeps.py",
    "tests/reliability/test_hostile_outputs.py::test_a_batch_of_hostile_outputs_leaks_no_process_and_no_memory",
    "tests/reliability/test_hostile_outputs.py::test_hostile_output_is_graded_zero_within_the_timeout",
    "tests/reliability/test_inputs_first.py::test_data_rows_and_tokenizers_are_checked_before_anything_is_written",
    "tests/reliability/test_inputs_first.py::test_output_folders_that_cannot_be_written_are_one_line",
    "tests/reliability/test_inputs_first.py::test_tag_keys_and_values_are_checked_like_agent_names",
    "tests/reliability/test_numerics.py::test_bad_steps_are_skipped_logged_and_the_run_goes_on",
    "tests/reliability/test_numerics.py::test_capability_is_finite_for_any_rewards",
    "tests/reliability/test_numerics.py::test_too_many_bad_steps_abort_with_one_clear_error",
    "tests/reliability/test_resources.py::test_long_run_keeps_memory_flat",
    "tests/reliability/test_resume_history.py",
    "tests/reliability/test_run_integrity.py::test_a_checkpoint_from_before_",
    "tests/reliability/test_run_integrity.py::test_agent_names_are_safe_and_unique",
    "tests/reliability/test_security.py::test_remote_code_is_off_by_default_everywhere",
    "tests/reliability/test_security.py::test_secrets_are_never_logged",
    "tests/reliability/test_secrets_everywhere.py",
    "tests/reliability/test_signals_and_locks.py::test_a_second_",
    "tests/reliability/test_signals_and_locks.py::test_sigterm_checkpoints",
    "tests/report/test_inference.py::test_user_margin_and_effect_replace_the_papers_with_their_reasons",
    "tests/report/test_layout.py::test_a_and_b_are_means_over_the_seeds_both_ran",
    "tests/report/test_layout.py::test_costs_not_logged_by_older_runs_are_said_so",
    "tests/rewards/test_adversarial_set.py",
    "tests/rewards/test_answer_shapes.py::test_shape_rules_are_bounded_on_hostile_text",
    "tests/rewards/test_forms.py::test_canonical_is_linear_on_hostile_text",
    "tests/rewards/test_forms.py::test_canonical_never_raises_and_is_idempotent",
    "tests/rewards/test_grader.py::test_close_leaves_no_children_and_grader_restarts",
    "tests/rewards/test_grader.py::test_deeply_nested_fractions",
    "tests/rewards/test_grader.py::test_last_boxed_",
    "tests/rewards/test_grader.py::test_parallel_workers_isolate_a_timeout",
    "tests/rewards/test_grader.py::test_sympy_bomb_times_out_and_grader_recovers",
    "tests/rewards/test_outside_suites.py",
    "tests/rewards/test_verl_reward.py::test_config_switch_selects_the_reward",
    "tests/rollout/test_counter_sampler.py::test_a_row_draws_the_same_alone_in_16_and_in_64",
    "tests/rollout/test_counter_sampler.py::test_generate_takes_one_number_from_the_agent_stream",
    "tests/rollout/test_counter_sampler.py::test_greedy_draws_nothing_and_top_k_one_is_greedy",
    "tests/rollout/test_counter_sampler.py::test_multinomial_is_transformers_own_from_the_agent_stream",
    "tests/rollout/test_hf_speed.py",
    "tests/rollout/test_stops.py::test_the_hf_engine_stops_at_every_stop_id_and_cuts_there",
    "tests/rollout/test_vllm_layout.py::test_replicas_generate_their_share_and_every_rank_gets_every_row_in_order",
    "tests/sweep/test_alpha_sweep.py",
    "tests/sweep/test_best_alpha.py",
    "tests/sweep/test_settings.py::test_bad_sampler_on_the_command_line_is_one_line_exit_2",
    "tests/tasks/test_math_task.py::test_hub_loading_fails_clearly_offline",
    "tests/test_theory.py::test_cli_quick_exits_0_and_prints_every_heading",
    "tests/test_theory.py::test_window_bias_quick_holds",
    "tests/tracking/test_experiments.py",
    "tests/ui/test_ui_check.py",
    "tests/tracking/test_metric_keys.py",
    "tests/tracking/test_reruns.py",
    "tests/tracking/test_ui.py::test_it_serves_the_store_and_the_reports_and_stops_both",
    "tests/trainer/test_fsdp.py",
    "tests/trainer/test_job_datasets.py::test_a_generated_task_names_its_generator_and_each_benchmark",
    "tests/trainer/test_ray.py",
    "tests/trainer/test_shared_placement.py::test_shared_and_local_runs_are_bit_identical",
    "tests/trainer/test_shared_placement.py::test_every_shared_call_is_between_its_agents_wake_and_sleep",
    "tests/trainer/test_shared_resume.py",
    "tests/trainer/test_resources.py::test_auto_placement_is_disjoint_on_cpus_and_where_it_fits_else_shared",
    "tests/agents/test_memory_plan.py::test_auto_takes_shared_where_disjoint_cannot_fit_and_refuses_neither",
    "tests/trainer/test_data_parallel.py::test_ranks_that_split_the_rows_end_where_one_agent_does",
    "tests/trainer/test_resources.py::test_a_placement_the_planner_rejects",
    "tests/trainer/test_temperature.py",
)
"""Node-id prefixes of the tests marked `slow` (about 3 s or more on the shared 2-core machine): training runs, real
processes, Ray, graders over whole labelled sets. Kept here, not as marks in the modules, so that one table says how
the suite is split and scheduled (tests/test_parallel.py checks that each prefix still names a test)."""

SLOW_FIXTURES = {
    "finished": "tests/reliability/test_run_integrity.py",  # a trained, finished run
    "multirun": "tests/e2e/test_glance.py",  # a two-job multirun
    "store": "tests/report/test_report.py",  # eight tiny training runs
    "ten": "tests/report/",  # the 10-seed synthetic report, written with its figures
    "tiny_run": "tests/evaluation/",  # a two-step training run
}
"""Costly module or session fixtures, and the node-id prefix of the tests they are defined for: a test there that
uses one (itself, or through another fixture) is `slow`."""


def is_slow(nodeid: str, fixtures: list[str]) -> bool:
    """Whether the test `nodeid`, using `fixtures` (their closure), is marked `slow`: SLOW, SLOW_FIXTURES."""
    return nodeid.startswith(SLOW) or any(f in SLOW_FIXTURES and nodeid.startswith(SLOW_FIXTURES[f]) for f in fixtures)


def order(nodeid: str, slow: bool) -> tuple[int, int]:
    """Sort key of a test in a worker's collection: LONGEST in their order, then the slow, then the rest."""
    first = next((i for i, prefix in enumerate(LONGEST) if nodeid.startswith(prefix)), len(LONGEST))
    return (first, 0 if slow else 1)


def worker_threads() -> int:
    """Torch threads of one worker: the cores shared among the workers."""
    return max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def make_scheduler(config, log):
    """xdist's scheduling of `--dist load` (its default with -n) with GROUPS kept together; None for another mode."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        """One work unit per test, or per GROUPS entry; units in the workers' collection order (`order`)."""

        def _split_scope(self, nodeid: str) -> str:
            return GROUPS.get(nodeid.split("::", 1)[0], nodeid)

    config.option.loadscopereorder = False  # xdist would put the units with the most tests first
    return GroupScheduling(config, log)
