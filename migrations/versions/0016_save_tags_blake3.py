"""saves' ETags made by BLAKE3

Strong ETags are now BLAKE3's first 128 bits of the bytes (``app/core/conditional.py``), where
they were BLAKE2b's. An archive pushed again knows a save the project holds by its stored tag,
compared with the tag of the pushed file, so every save's tag is made again from its file (the
stored bytes, inflated when stored gzip-compressed). No other stored tag is ever compared with a
new one (each is compared with itself only: a client's ``If-Match``, a chained tag's next
link), so they stay as they are. One save at a time: a large one is read and hashed alone.
A stored file that does not inflate (damaged on disk: its export fails too) keeps its tag, and
the migration says which, rather than leave every other save untagged behind a failed upgrade.
The downgrade makes the BLAKE2b tags again.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 05:30:00.000000
"""

import gzip
import hashlib
import logging
import zlib
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op
from blake3 import blake3

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger(f"alembic.migration.{revision}")

saves = sa.table(
    "saves",
    sa.column("id", sa.BigInteger()),
    sa.column("content", sa.LargeBinary()),
    sa.column("content_gzipped", sa.Boolean()),
    sa.column("etag", sa.String()),
)


def _blake3_tag(content: bytes) -> str:
    return '"' + blake3(content).hexdigest(length=16) + '"'


def _blake2b_tag(content: bytes) -> str:
    return '"' + hashlib.blake2b(content, digest_size=16).hexdigest() + '"'


def _tag_every_save(tag_of: Callable[[bytes], str]) -> None:
    connection = op.get_bind()
    ids = connection.execute(sa.select(saves.c.id).order_by(saves.c.id)).scalars().all()
    for save_id in ids:
        content, gzipped = connection.execute(
            sa.select(saves.c.content, saves.c.content_gzipped).where(saves.c.id == save_id)
        ).one()
        try:
            file = gzip.decompress(content) if gzipped else bytes(content)
        except (OSError, EOFError, zlib.error) as exc:
            log.warning(
                "save %s: its stored file does not inflate (%s); its tag is kept", save_id, exc
            )
            continue
        connection.execute(saves.update().where(saves.c.id == save_id).values(etag=tag_of(file)))


def upgrade() -> None:
    _tag_every_save(_blake3_tag)


def downgrade() -> None:
    _tag_every_save(_blake2b_tag)
