"""Owns the report's timestamps: writing them (ISO 8601 UTC with a Z) and reading them back."""

from __future__ import annotations

from datetime import datetime, timezone

#: How reports write time: to the second, UTC, with a Z.
REPORT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """Now, as the audit JSON writes its timestamps."""
    return datetime.now(timezone.utc).strftime(REPORT_FORMAT)


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 timestamp ('Z' accepted, naive taken as UTC); None when it does not parse."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def parse_timestamp(text: str) -> float | None:
    """Unix time of an ISO 8601 timestamp; None when it does not parse."""
    moment = parse_time(text)
    return None if moment is None else moment.timestamp()
