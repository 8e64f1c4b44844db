"""The integrations stage: fleetcheck's verdict handed to the engines fleets run.

`health_check.py` (a node's own health check: the cached verdict, Slurm's drain and resume,
node-problem-detector's plugin), `nfd.py` (node-feature-discovery's feature file) and `hook.py`
(the `--on-change` hook). Its `__init__` imports nothing.
"""
