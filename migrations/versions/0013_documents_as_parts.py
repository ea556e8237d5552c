"""documents kept as their parts, and memory ids by their number

Appends cost the same at any size (issue 20):

- ``memory_items.id_number``: the number of an id of the writer's form (``dec-007``: 7), so
  that the next id is read from an index instead of every id of the kind. Filled in here for
  the items stored before.
- ``feature_contexts.parts_at`` and ``run_states.parts_at``: a document kept as its head and
  its members' rows (handover notes in ``feature_handovers``, history entries in the new
  ``run_beads``); NULL, as for every document stored before, means ``content`` is the whole
  file. Such a document is split the first time it changes (``app/core/documents.py``), so
  nothing is rewritten here.
- ``run_states.size_bytes``: the whole file's size, which a run's row needs once its content
  is a head. Filled in from the stored files.

Downgrading joins every document kept as its parts back into its ``content`` (the members in
their order, each moved in to its collection's level: ``app/formats/parts.py``, written out
here), then drops what was added.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-22 22:00:00.000000
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 10_000
# app/memory/service.py: ID_PREFIX, ID_PATTERN and ID_NUMBER_CAP, as they are at 0013.
ID_PATTERNS = {
    kind: re.compile(re.escape(prefix) + r"-(\d+)$")
    for kind, prefix in (("decision", "dec"), ("failure", "fail"), ("constraint", "con"))
}
ID_NUMBER_CAP = 2**63 - 1

items = sa.table(
    "memory_items",
    sa.column("id", sa.BigInteger()),
    sa.column("kind", sa.String()),
    sa.column("item_id", sa.String()),
    sa.column("id_number", sa.BigInteger()),
)


# No batch mode (as 0011): on SQLite it rebuilds a table, and dropping the old one with
# foreign keys on deletes what refers to it. Adding a column, dropping one (SQLite 3.35+) and
# indexes need no rebuild.


def _number_the_ids() -> None:
    connection = op.get_bind()
    last = 0
    while True:
        rows = connection.execute(
            sa.select(items.c.id, items.c.kind, items.c.item_id)
            .where(items.c.id > last)
            .order_by(items.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        last = rows[-1].id
        numbered = [
            {"row_id": row.id, "number": min(int(match.group(1)), ID_NUMBER_CAP)}
            for row in rows
            if row.kind in ID_PATTERNS and (match := ID_PATTERNS[row.kind].match(row.item_id))
        ]
        if numbered:
            connection.execute(
                sa.update(items)
                .where(items.c.id == sa.bindparam("row_id"))
                .values(id_number=sa.bindparam("number")),
                numbered,
            )


def upgrade() -> None:
    op.add_column("memory_items", sa.Column("id_number", sa.BigInteger(), nullable=True))
    _number_the_ids()
    # After the backfill, which then writes no index entries.
    op.create_index(
        "ix_memory_items_project_kind_number",
        "memory_items",
        ["project_id", "kind", "id_number"],
        sqlite_where=sa.text("id_number IS NOT NULL"),
        postgresql_where=sa.text("id_number IS NOT NULL"),
    )
    op.add_column("feature_contexts", sa.Column("parts_at", sa.BigInteger(), nullable=True))
    op.add_column("run_states", sa.Column("parts_at", sa.BigInteger(), nullable=True))
    # NOT NULL needs a default on SQLite's ADD COLUMN; every row is measured just below.
    op.add_column(
        "run_states",
        sa.Column("size_bytes", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute("UPDATE run_states SET size_bytes = LENGTH(content)")
    if op.get_bind().dialect.name == "postgresql":
        # SQLite cannot drop a column's default without a rebuild; the app always sets it.
        op.alter_column("run_states", "size_bytes", server_default=None)
    op.create_table(
        "run_beads",
        sa.Column(
            "run_state_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("bead_key", sa.String(length=32), nullable=False),
        sa.Column("bead", sa.LargeBinary(), nullable=False),
        sa.Column("part", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_state_id"],
            ["run_states.id"],
            name=op.f("fk_run_beads_run_state_id_run_states"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_state_id", "bead_key", name=op.f("pk_run_beads")),
    )


def _join(head: bytes, at: int, members: list[bytes]) -> bytes:
    """app/formats/parts.py ``join``."""
    if not members:
        return head
    line = head.rfind(b"\n", 0, at) + 1
    leading = head[line:at]
    outer = b"\n" + leading[: len(leading) - len(leading.lstrip(b" "))]
    inner = outer + b"  "
    body = (b"," + inner).join(member.replace(b"\n", inner) for member in members)
    return head[: at + 1] + inner + body + outer + head[at + 1 :]


def _join_all(table: str, members: str) -> None:
    """Every document of ``table`` kept as its parts, whole again; ``members`` selects a
    document's members (by ``:id``) in their order."""
    connection = op.get_bind()
    parted = connection.execute(
        sa.text(f"SELECT id, content, parts_at FROM {table} WHERE parts_at IS NOT NULL")
    ).all()
    for row_id, head, at in parted:
        found = connection.execute(sa.text(members), {"id": row_id}).scalars().all()
        connection.execute(
            sa.text(f"UPDATE {table} SET content = :content WHERE id = :id"),
            {"content": _join(bytes(head), at, [bytes(member) for member in found]), "id": row_id},
        )


def downgrade() -> None:
    _join_all(
        "feature_contexts",
        "SELECT note FROM feature_handovers WHERE context_id = :id ORDER BY position",
    )
    _join_all("run_states", "SELECT part FROM run_beads WHERE run_state_id = :id ORDER BY bead")
    op.drop_table("run_beads")
    op.drop_column("run_states", "size_bytes")
    op.drop_column("run_states", "parts_at")
    op.drop_column("feature_contexts", "parts_at")
    op.drop_index("ix_memory_items_project_kind_number", table_name="memory_items")
    op.drop_column("memory_items", "id_number")
