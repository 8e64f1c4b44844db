"""Messages of Triton and its tools read against the records' texts: every cause they name."""

import re

from fleetcheck.probe.parts.catalogue import MESSAGE_RULES


def message_causes(text):
    """[(cause id, the line that names it)] for every record whose text a message matches,
    in record order, each cause once (the caller drops those whose own check passed)."""
    found: list = []
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    for pattern, cause in MESSAGE_RULES:
        if any(cause == seen for seen, _ in found):
            continue
        for line in lines:
            if re.search(pattern, line):
                found.append((cause, line))
                break
    return found


def classify_error(text):
    """The first cause a message names, or None."""
    found = message_causes(text)
    return found[0][0] if found else None
