"""atari run state

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 23:48:07.330684
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_states",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("run", sa.String(length=128), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("iteration", sa.BigInteger(), nullable=False),
        sa.Column("current_bead", sa.String(), nullable=False),
        sa.Column("total_cost", sa.Float(), nullable=False),
        sa.Column("total_turns", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.String(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("backup", sa.LargeBinary(), nullable=True),
        sa.Column("backup_etag", sa.String(length=40), nullable=True),
        sa.Column("modified_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_run_states_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_states")),
        sa.UniqueConstraint("project_id", "run", name=op.f("uq_run_states_project_id_run")),
    )
    with op.batch_alter_table("run_states", schema=None) as batch_op:
        batch_op.create_index(
            "ix_run_states_project_modified", ["project_id", "modified_at", "id"], unique=False
        )

    op.create_table(
        "run_counted_sessions",
        sa.Column(
            "run_state_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("session_id", sa.String(length=256), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_state_id"],
            ["run_states.id"],
            name=op.f("fk_run_counted_sessions_run_state_id_run_states"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_state_id", "session_id", name=op.f("pk_run_counted_sessions")),
    )


def downgrade() -> None:
    op.drop_table("run_counted_sessions")
    with op.batch_alter_table("run_states", schema=None) as batch_op:
        batch_op.drop_index("ix_run_states_project_modified")

    op.drop_table("run_states")
