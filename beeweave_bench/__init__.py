"""Benchmarks behind ``beeweave bench …``: every run measures its baselines beside it."""
