"""Reliability and security: faults, hostile input, leaks, with figures."""
