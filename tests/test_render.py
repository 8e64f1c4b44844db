"""The renderers' registry: every format renders, an unknown one is refused by name."""

from __future__ import annotations

import pytest

from fleetcheck.render import FORMATS, RenderError, render
from tests.render.sample import sample_report


def test_every_format_renders_and_unknown_formats_are_refused() -> None:
    for fmt in FORMATS:
        assert render(sample_report(), fmt, color=False)
    with pytest.raises(RenderError, match="unknown format 'yaml'; choose one of table, html"):
        render(sample_report(), "yaml")
