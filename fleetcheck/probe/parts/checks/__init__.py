"""Checks: one class of `check_<id>` methods per family, each judging one cause from the facts."""
