"""The report stage: what an audit's report holds (`content.py`: node results, checks, verdicts
and the status vocabularies, the JSON contract's words).

Its `__init__` imports nothing: `content.py` is a floor that the kinds, the transports and every
stage above them import.
"""
