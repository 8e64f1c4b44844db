"""Smoke tests of the benchmark helpers under bench/."""
