"""The N-agent training loop (`loop.train`) and its parts: the step, rollouts, executors, params, capability
estimates, validation, evaluation, checkpoints."""
