"""Evaluation: failures named by their causes (classify, diagnose, objects, the job's limits),
the fixes filled for the node, the checks run in causal order and the verdict, and what the
frameworks will do."""
