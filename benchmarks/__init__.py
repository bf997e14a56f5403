"""Speed and memory measurements that print numbers (not timed tests): `python -m benchmarks.<name>`."""
