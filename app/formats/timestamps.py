"""ISO 8601 timestamps as the Python-written formats carry them."""

from datetime import UTC, datetime
from typing import Any


def to_utc(moment: datetime) -> datetime | None:
    """``moment`` in UTC (a naive one is taken as UTC); None when UTC cannot represent it
    (year 1 with a positive offset, year 9999 with a negative one)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def parse_iso8601(value: Any) -> datetime | None:
    """An aware UTC datetime for an ISO 8601 string (``Z`` or an offset; none means UTC),
    or None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return to_utc(parsed)
