"""The suite's warning policy (pyproject.toml, `filterwarnings`): a warning raised from
fleetcheck's own modules fails the test that raised it; a library's own warnings do not."""

from __future__ import annotations

import warnings

import pytest


def warn_from(module: str, category: type[Warning] = DeprecationWarning) -> None:
    """`warnings.warn` called by code of `module` (its frame's `__name__`), as a library's
    deprecation with stacklevel=2 names its caller's module."""
    code = compile("warnings.warn('old call', category, stacklevel=1)", f"<{module}>", "exec")
    exec(code, {"__name__": module, "warnings": warnings, "category": category})


@pytest.mark.parametrize("module", ["fleetcheck", "fleetcheck.cli", "fleetcheck.transport.ssh"])
@pytest.mark.parametrize("category", [DeprecationWarning, UserWarning, RuntimeWarning])
def test_a_warning_from_fleetchecks_modules_is_an_error(module: str,
                                                        category: type[Warning]) -> None:
    with pytest.raises(category, match="old call"):
        warn_from(module, category)


@pytest.mark.parametrize("module", ["asyncssh.crypto.dsa", "fleetcheckish", "tests.test_cli"])
def test_a_warning_from_elsewhere_is_only_shown(module: str) -> None:
    # record=True swaps only how a warning is shown: the filters stay those of the test.
    with warnings.catch_warnings(record=True) as caught:
        warn_from(module)
    assert [str(warning.message) for warning in caught] == ["old call"]
