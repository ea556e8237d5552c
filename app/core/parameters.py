"""A route's path, query, header and cookie parameters and its JSON body, read as FastAPI 0.165
reads them (``fastapi.dependencies.utils.request_params_to_args`` and ``request_body_to_args``,
and its request handler's parse of the body: the same values, the same errors in the same
order), with what FastAPI works out again on every request worked out once.

For each field FastAPI asks on every request whether it is a model, a sequence or a JSON
field, which names the request may hold it under, and where it is: for a decision POST's two
parameters, 3.9% of its instructions more than here (callgrind, 2026-11-26). A field of a
plain type here (text, a number, a truth value or an enumeration, or None) under its one name
is read with that decided once; any other goes through FastAPI's function.
"""

import copy
import enum
import json
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Union, get_args, get_origin

from fastapi import HTTPException, Request, params
from fastapi._compat import ModelField, Undefined, get_missing_field_error
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.telemetry._api import _validation_failed  # FastAPI's handler calls it likewise

from app.core.body import media_type_of
from app.formats import jsondoc

_PLAIN_TYPES = (str, int, float, bool)

Source = Callable[[Request], Mapping[str, Any]]


def _plain(annotation: Any) -> bool:
    """Whether a value of this type is one value (not a model, nor a list FastAPI gathers
    from repeated keys)."""
    if get_origin(annotation) in (Union, types.UnionType):
        return all(argument is type(None) or _plain(argument) for argument in get_args(annotation))
    return isinstance(annotation, type) and (
        issubclass(annotation, _PLAIN_TYPES) or issubclass(annotation, enum.Enum)
    )


@dataclass(frozen=True)
class _PlainField:
    """A field FastAPI reads as ``source.get(key)`` and validates at ``loc``."""

    field: ModelField
    key: str
    loc: tuple[str, str]

    def read(self, received: Mapping[str, Any], values: dict[str, Any]) -> list[Any]:
        """Put the field's value in ``values``; its errors (none when it is valid)."""
        value = received.get(self.key)
        info = self.field.field_info
        if value is None:
            if info.is_required():
                return [get_missing_field_error(loc=self.loc)]
            value = copy.deepcopy(self.field.default)
            if not info.validate_default:
                values[self.field.name] = value
                return []
        found, errors = self.field.validate(value, values, loc=self.loc)
        if not errors:
            values[self.field.name] = found
        return errors


def _reader(field: ModelField) -> _PlainField | ModelField:
    """The field as read here, when FastAPI would read it under its one name (no alias
    choices, no config naming others) as one value; else itself, for FastAPI's function."""
    info = field.field_info
    if info.validation_alias is not None or field.config or not _plain(info.annotation):
        return field
    assert isinstance(info, params.Param), "a parameter's field info is a Param"
    return _PlainField(field, field.alias, (info.in_.value, field.alias))


class ParameterReader:
    """Reads a dependant's path, query, header and cookie parameters from a request: only the
    groups it has, in FastAPI's order (errors are reported in it)."""

    def __init__(self, dependant: Dependant) -> None:
        self._groups: list[tuple[Source, list[_PlainField | ModelField]]] = [
            (attrgetter(source), [_reader(field) for field in fields])
            for source, fields in (
                ("path_params", dependant.path_params),
                ("query_params", dependant.query_params),
                ("headers", dependant.header_params),
                ("cookies", dependant.cookie_params),
            )
            if fields
        ]

    def read(self, request: Request) -> tuple[dict[str, Any], list[Any]]:
        """The parameters' values by name, and the errors of those that are not valid."""
        values: dict[str, Any] = {}
        errors: list[Any] = []
        for source, fields in self._groups:
            received = source(request)
            for field in fields:
                if isinstance(field, _PlainField):
                    errors += field.read(received, values)
                else:
                    found, wrong = request_params_to_args([field], received)
                    values.update(found)
                    errors += wrong
        return values, errors


def validation_failed(errors: list[Any], body: Any) -> RequestValidationError:
    """FastAPI's error for a request its handler finds invalid, reported to FastAPI's native
    telemetry as its handler reports it (the ``fastapi.validation.failed`` event and the
    request's data, when an OpenTelemetry provider is configured; nothing otherwise)."""
    error = RequestValidationError(errors, body=body)
    _validation_failed(error)
    return error


class BodyReader:
    """Reads a dependant's body parameters from the request's JSON body."""

    def __init__(self, dependant: Dependant, embed_body_fields: bool) -> None:
        self._fields = dependant.body_params
        self._embed = embed_body_fields

    async def received(self, request: Request) -> Any:
        """The body as FastAPI hands it to validation: parsed when its media type is
        ``application/json`` or ``application/*+json``, its bytes otherwise (a route class
        refuses other media types first), ``Undefined`` when empty. Malformed JSON raises
        FastAPI's own errors at once, before any parameter is read."""
        raw = await request.body()
        if not raw:
            return Undefined
        media_type = media_type_of(request) or ""
        main_type, _, subtype = media_type.partition("/")
        # ``email.message`` reads a type without exactly one slash as text/plain.
        if media_type.count("/") != 1 or main_type != "application":
            return raw
        if not (subtype == "json" or subtype.endswith("+json")):
            return raw
        try:
            return json.loads(jsondoc.text_of(raw))
        except json.JSONDecodeError as exc:
            error = {
                "type": "json_invalid",
                "loc": ("body", exc.pos),
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": exc.msg},
            }
            raise validation_failed([error], exc.doc) from exc
        except Exception as exc:  # nesting too deep, bytes that are not UTF-8: as FastAPI says
            raise HTTPException(400, "There was an error parsing the body") from exc

    async def read(self, received: Any) -> tuple[dict[str, Any], list[Any]]:
        """The body parameters' values by name, and the errors of those that are not valid."""
        return await request_body_to_args(self._fields, received, self._embed)
