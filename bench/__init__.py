"""Benchmarks: fleetcheck against the floor, ansible-core and an ssh loop (see run.py)."""
