"""The N-agent training loop (`loop.train`) and its parts: the step, rollouts, executors, params, validation,
evaluation, checkpoints."""
