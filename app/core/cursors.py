"""The seal on every list cursor: what a client holds is encrypted and authenticated under a
server-side key, so that it can neither read a position (a row's primary key is one sequence
shared by every tenant: its jumps between two of a tenant's own writes counted the rows other
tenants wrote meanwhile) nor forge one.

AES-SIV (RFC 5297) with a 512-bit key (AES-256): deterministic authenticated encryption, with
no nonce to draw and so none that can repeat under a long-lived key (a random 96-bit AES-GCM
nonce repeats, with a probability that matters, after about 2**32 cursors, and one repeat gives
away GCM's authentication key). Being deterministic, it gives the same cursor for the same
position of the same list, which tells a client only what it already knows. The associated
data names the list and what it is scoped to (tenant, project, kind): a cursor is refused by
every other list, tenant and project, without carrying any of them.

The key is derived (HKDF-SHA256, a label of its own) from ``CONTEXT_STORE_FINGERPRINT_KEY``,
the secret every replica already shares and that outlives restarts, never used raw for a
second purpose. When it is unset on PostgreSQL, the process draws its own key: a cursor
handed out before a restart is then refused like any other cursor not made by this server (a
422 that tells the client to start the list again)."""

import base64
import binascii

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# Changing the payload's layout changes this, which refuses the cursors of the layout before.
_FORMAT = "cursor-v1"
_KEY_LABEL = b"context-store list cursors v1"
Scope = tuple[str | int | None, ...]


class CursorSeal:
    """Seals a list's position into the opaque, URL-safe text of a cursor, and opens it."""

    def __init__(self, secret: bytes) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=_KEY_LABEL).derive(secret)
        self._cipher = AESSIV(key)

    def seal(self, position: bytes, list_name: str, scope: Scope) -> str:
        sealed = self._cipher.encrypt(position, [_context(list_name, scope)])
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def open(self, cursor: str, list_name: str, scope: Scope) -> bytes | None:
        """The position ``seal`` sealed into ``cursor`` for this list and scope, or None for any
        other text: tampered, truncated, another list's or scope's, or sealed under another key."""
        try:
            sealed = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        except (binascii.Error, ValueError):  # a non-ASCII str is a ValueError
            return None
        # One text per cursor: base64's last character has bits the decoder ignores.
        if base64.urlsafe_b64encode(sealed).rstrip(b"=") != cursor.encode("ascii"):
            return None
        try:
            return self._cipher.decrypt(sealed, [_context(list_name, scope)])
        except (InvalidTag, ValueError):  # ValueError: shorter than the tag
            return None


def _context(list_name: str, scope: Scope) -> bytes:
    return orjson.dumps([_FORMAT, list_name, *scope])
