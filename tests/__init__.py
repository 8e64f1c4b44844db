"""fleetcheck's test suite, a package so its helpers import by their full name.

`tests.fleet` (the loopback fleet kit), `tests.nodeenv` (stub GPU nodes), `tests.fakes`,
`tests.fix.support`... are imported as `tests.*` with the repository root on sys.path
(pyproject's `pythonpath`), never by putting tests/ itself on sys.path, where their short
names would clash with fleetcheck's modules and with installed distributions (`nodeenv`).
"""
