"""API keys and the principal every request acts as."""

import hashlib
import secrets
from dataclasses import dataclass
from enum import StrEnum

KEY_PREFIX = "cs_"


class Scope(StrEnum):
    read = "read"
    write = "write"
    admin = "admin"


ALL_SCOPES = frozenset(Scope)


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[Scope]
    key_id: str | None = None  # None with authentication off


def generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def parse_scopes(text: str) -> frozenset[Scope]:
    """``"read,write"`` to scopes; raises ValueError naming an unknown scope."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError("at least one scope is required")
    unknown = [name for name in names if name not in Scope.__members__]
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}; known: read, write, admin")
    return frozenset(Scope(name) for name in names)


def format_scopes(scopes: frozenset[Scope]) -> str:
    return ",".join(scope.value for scope in Scope if scope in scopes)
