"""The judgement stage: a probed node judged under a playbook's policy, what its status means,
its root cause and fix, the exit code of a run, and what each framework will do.

`policy.py` (the policy, a node's status and reason), `statuses.py` (what a status means),
`exit_codes.py`, `fixes.py` (a node's root cause and fix), `frameworks.py`, `gpustate.py` (the
GPUs' state under a playbook), `consistency.py` (fleet-wide checks) and `gate.py` (the pre-job
gate). Its `__init__` imports nothing: the report's data below it import none of it.
"""
