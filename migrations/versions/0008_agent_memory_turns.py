"""agent memory turns

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-22 02:00:00.000000
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 10_000
items = sa.table(
    "agent_memory_items",
    sa.column("id", sa.BigInteger()),
    sa.column("project_id", sa.BigInteger()),
    sa.column("agent", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("turn_id", sa.Text()),
    sa.column("turn_key", sa.String()),
)
turns = sa.table(
    "agent_memory_turns",
    sa.column("project_id", sa.BigInteger()),
    sa.column("agent", sa.String()),
    sa.column("turn_key", sa.String()),
    sa.column("first_item_id", sa.BigInteger()),
)
RAW_TRACES = sa.and_(items.c.kind == "raw_trace", items.c.turn_id.is_not(None))


def _backfill() -> None:
    """Every stored raw trace's turn_key (app.agents.models.turn_key, written out here so that
    this migration never changes with the app), in batches by id; then each turn's first
    trace, which is what appends register from now on."""
    connection = op.get_bind()
    last_id = 0
    while True:
        rows = connection.execute(
            sa.select(items.c.id, items.c.turn_id)
            .where(RAW_TRACES, items.c.id > last_id)
            .order_by(items.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        # turn_id as appends now store it (app.core.db.searchable: SQLite took NUL before;
        # neither database ever held a lone surrogate), so that old and new rows of a turn match.
        connection.execute(
            items.update()
            .where(items.c.id == sa.bindparam("item_id"))
            .values(turn_id=sa.bindparam("stored_id"), turn_key=sa.bindparam("key")),
            [
                {
                    "item_id": row.id,
                    "stored_id": row.turn_id.replace("\x00", "\ufffd"),
                    "key": hashlib.sha256(row.turn_id.encode()).hexdigest(),
                }
                for row in rows
            ],
        )
        last_id = rows[-1].id
    first_traces = (
        sa.select(items.c.project_id, items.c.agent, items.c.turn_key, sa.func.min(items.c.id))
        .where(RAW_TRACES)
        .group_by(items.c.project_id, items.c.agent, items.c.turn_key)
    )
    connection.execute(
        turns.insert().from_select(
            ["project_id", "agent", "turn_key", "first_item_id"], first_traces
        )
    )


def upgrade() -> None:
    op.create_table(
        "agent_memory_turns",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("turn_key", sa.String(length=64), nullable=False),
        sa.Column("first_item_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_agent_memory_turns_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_memory_turns")),
        sa.UniqueConstraint(
            "project_id",
            "agent",
            "turn_key",
            name=op.f("uq_agent_memory_turns_project_id_agent_turn_key"),
        ),
    )
    with op.batch_alter_table("agent_memory_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn_key", sa.String(length=64), nullable=True))
    _backfill()
    # After the backfill, which then writes no index entries.
    with op.batch_alter_table("agent_memory_turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_agent_memory_turns_first_item",
            ["project_id", "agent", "first_item_id"],
            unique=False,
        )
    with op.batch_alter_table("agent_memory_items", schema=None) as batch_op:
        batch_op.create_index(
            "ix_agent_memory_items_turn",
            ["project_id", "agent", "kind", "turn_key", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("agent_memory_items", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_memory_items_turn")
        batch_op.drop_column("turn_key")
    with op.batch_alter_table("agent_memory_turns", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_memory_turns_first_item")
    op.drop_table("agent_memory_turns")
