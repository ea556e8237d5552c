"""agent snapshots and memory

Revision ID: 0004
Revises: 0001
Create Date: 2026-11-21 23:46:06.681600
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_memory_items",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=True),
        sa.Column("line", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_agent_memory_items_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_memory_items")),
    )
    with op.batch_alter_table("agent_memory_items", schema=None) as batch_op:
        batch_op.create_index(
            "ix_agent_memory_items_agent_kind", ["project_id", "agent", "kind", "id"], unique=False
        )

    op.create_table(
        "agent_snapshots",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_agent_snapshots_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_snapshots")),
        sa.UniqueConstraint(
            "project_id", "agent", name=op.f("uq_agent_snapshots_project_id_agent")
        ),
    )


def downgrade() -> None:
    op.drop_table("agent_snapshots")
    with op.batch_alter_table("agent_memory_items", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_memory_items_agent_kind")

    op.drop_table("agent_memory_items")
