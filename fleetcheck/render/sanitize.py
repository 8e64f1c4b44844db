"""Neutralising strings that came from nodes before they reach a terminal, XML or a textfile."""

from __future__ import annotations

import re
from typing import Any

from fleetcheck.text import clip

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI), and the Unicode bidi/format controls
# that can reorder what a reader sees ("Trojan source").
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]"
)
_TERMINAL_UNSAFE_KEEP_NEWLINE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]"
)
# Characters XML 1.0 cannot carry at all, not even as character references.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def as_text(value: Any) -> str:
    """Any fact as display text: strings as they are, numbers formatted, the rest as repr."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return repr(value)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_line(value: Any) -> str:
    """One line safe for a terminal: every control character shown as a visible `\\xNN`."""
    return _TERMINAL_UNSAFE.sub(_escape_char, as_text(value))


def terminal_block(value: Any) -> str:
    """Several lines safe for a terminal: newlines kept, other controls shown as `\\xNN`."""
    text = as_text(value).replace("\r\n", "\n")
    return _TERMINAL_UNSAFE_KEEP_NEWLINE.sub(_escape_char, text)


def xml_text(value: Any) -> str:
    """Text XML 1.0 can carry: illegal characters removed (ElementTree escapes the rest)."""
    return _XML_ILLEGAL.sub("", as_text(value))


def prometheus_label(value: Any) -> str:
    """A label value escaped per the text exposition format: backslash, quote, newline.

    Other control characters are made visible first, so `cat` of the textfile stays harmless.
    """
    text = terminal_block(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


#: Longest cause, fix or change shown on one line (gate, history); beyond that is noise.
_MAX_TEXT = 300


def sanitise(text: str, limit: int = _MAX_TEXT) -> str:
    """One terminal-safe line: whitespace runs (newlines too) become one space, other control
    characters are shown as `\\xNN` as every terminal renderer shows them, and long text is
    clipped to `limit` characters."""
    cleaned = terminal_line(" ".join(text.split()))
    return clip(cleaned, limit)
