"""What a name or a value must be to be stored: the rules both the request schemas and the path
and query parameters check (422).

Pydantic and the standard library only, so that the schemas, and the client through them, load
without FastAPI or SQLAlchemy; the parameter aliases built on these are in ``identifiers.py``
and ``params.py``.
"""

from typing import Annotated
from urllib.parse import quote

from pydantic import BeforeValidator

from app.formats import jsondoc

# The largest page of any list.
MAX_LIMIT = 500

# The most entries a list in a request may hold (a handover's critical points, a key's scopes,
# an MCP tool's items). Pydantic reports every wrong entry, and listing a million of them (a
# 3 MB body of zeros where names go) cost 12 s of CPU and 1.2 GB (2026-11-27); past this
# many, it stops at the first entry over.
MAX_LIST_ITEMS = 10_000

# The one pattern every name in a path (project, agent, run, feature, bead, tenant) obeys.
IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
IDENTIFIER_RULE = (
    "1 to 128 characters: letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
)


def storable(text: str) -> str:
    """Refuse what a database text column cannot hold."""
    if not jsondoc.is_storable(text):
        raise ValueError("must hold no NUL character and no lone surrogate")
    return text


StorableStr = Annotated[str, BeforeValidator(lambda v: storable(v) if isinstance(v, str) else v)]
"""A request string that ends up in a text column."""


def path_segment(name: str) -> str:
    """A name as one segment of a URL's path, as the service's own ``Location`` headers and its
    Python client write it: escaped, so that no name is another path or a query, and a name of
    dots is not a step up (clients resolve a URL's dot segments away: an item whose id was
    ".." was given a ``Location`` no client reached)."""
    escaped = quote(name, safe="")
    return escaped.replace(".", "%2E") if not escaped.strip(".") else escaped
