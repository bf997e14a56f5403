"""The N-agent training loop (`loop.train`) and its parts: pool, update, evaluation, checkpoints."""
