"""What the renderers do to text from a node: one inert terminal line, a Prometheus label value
that reads back as it was, with separators and bidi controls shown escaped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.render.sanitize import prometheus_label, terminal_line

from .sample import CONTROL


@given(st.text())
def test_terminal_line_leaves_no_control_character(text: str) -> None:
    assert not CONTROL.search(terminal_line(text).replace("\n", "\x00"))
    assert "\n" not in terminal_line(text)


#: What prometheus_label shows escaped on purpose, so `cat` of the textfile stays harmless:
#: controls, surrogates, line/paragraph separators and the bidi/format controls.
_NEUTRALISED = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"),
                                      blacklist_characters=_NEUTRALISED)))
def test_prometheus_labels_round_trip_printable_text(text: str) -> None:
    exposition = f'm{{l="{prometheus_label(text)}"}} 1\n'
    (family,) = text_string_to_metric_families(exposition)
    assert family.samples[0].labels == {"l": text}


def test_prometheus_labels_show_separators_and_bidi_controls_escaped() -> None:
    label = prometheus_label("a\u2028b\u202ec")
    exposition = f'm{{l="{label}"}} 1\n'
    (family,) = text_string_to_metric_families(exposition)
    assert family.samples[0].labels == {"l": "a\\u2028b\\u202ec"}
