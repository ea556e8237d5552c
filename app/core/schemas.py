"""Models every domain shares; pydantic only, so that the client can load them."""

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.formats.errors import MAX_LISTED

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(
        description="The `cursor` of the next page; null on the last page only. A page may "
        "hold fewer than `limit` items while more follow (a list of documents ends a page at "
        "the body limit)."
    )


class ClosedBody(BaseModel):
    """A request body that takes only the fields it names: any other is refused (422), so that
    a misspelt field is not silently dropped.

    Pydantic builds an error for every unknown field before the problem keeps the first
    ``MAX_LISTED``: a 4 MiB body of them cost a handover POST 4 s of the server's CPU
    (2026-11-27). So it is handed the fields named and only the first ``MAX_LISTED`` + 1
    others, enough for the problem to say its list is cut."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _unknown_fields_past_the_listed_dropped(cls, data: Any) -> Any:
        if not isinstance(data, dict) or len(data) <= len(cls.model_fields) + MAX_LISTED:
            return data
        # Every name a field may come under: its own, its alias, its validation alias.
        named = set(cls.model_fields)
        for field in cls.model_fields.values():
            named |= {
                alias for alias in (field.alias, field.validation_alias) if type(alias) is str
            }
        kept: dict[Any, Any] = {}
        unknown = 0
        for key, value in data.items():
            if key in named:
                kept[key] = value
            elif unknown <= MAX_LISTED:
                kept[key] = value
                unknown += 1
        return kept
