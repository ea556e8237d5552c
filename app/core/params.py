"""Path and query values with the ranges the database can hold, checked where they come in (422)."""

from datetime import datetime
from typing import Annotated

from fastapi import Path
from pydantic import AfterValidator, BeforeValidator

from app.formats import jsondoc
from app.formats.timestamps import to_utc


def _digits(value: object) -> object:
    # Python's int() also reads "+1", " 1", "01", "0_1" and other scripts' digits: more names
    # for 1.
    if isinstance(value, str) and not (
        value.isascii() and value.isdigit() and (value == "0" or not value.startswith("0"))
    ):
        raise ValueError("must be a number written in the digits 0-9 alone, without leading zeros")
    return value


SaveNumber = Annotated[
    int,
    Path(
        ge=1,
        le=jsondoc.INT64_MAX,
        description="The save's `id`: its number within the project (1, 2, 3...), never reused.",
    ),
    BeforeValidator(_digits),
]


def _utc_instant(moment: datetime) -> datetime:
    converted = to_utc(moment)
    if converted is None:
        raise ValueError("the instant is outside the range of UTC timestamps")
    return converted


def _not_a_number(value: object) -> object:
    # Pydantic would read "1.5" as unix seconds; the contract's instants are ISO 8601.
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
        raise ValueError("must be an ISO 8601 date-time, not a number")
    return value


UTCInstant = Annotated[datetime, BeforeValidator(_not_a_number), AfterValidator(_utc_instant)]
"""An ISO 8601 date-time in a query; one without a zone is UTC."""
