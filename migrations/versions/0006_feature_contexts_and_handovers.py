"""feature contexts and handovers

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-21 23:47:24.258322
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "feature_contexts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("feature_id", sa.String(length=128), nullable=False),
        sa.Column("current_phase", sa.String(), nullable=True),
        sa.Column("intervention_required", sa.Boolean(), nullable=False),
        sa.Column("blocked_task", sa.String(), nullable=True),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_feature_contexts_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feature_contexts")),
        sa.UniqueConstraint(
            "project_id", "feature_id", name=op.f("uq_feature_contexts_project_id_feature_id")
        ),
    )
    with op.batch_alter_table("feature_contexts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_feature_contexts_project_created", ["project_id", "created_at", "id"], unique=False
        )
        batch_op.create_index(
            "ix_feature_contexts_project_intervention",
            ["project_id", "intervention_required"],
            unique=False,
        )
        batch_op.create_index(
            "ix_feature_contexts_project_phase", ["project_id", "current_phase"], unique=False
        )

    op.create_table(
        "feature_handovers",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column(
            "context_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("feature_id", sa.String(length=128), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("from_agent", sa.String(length=256), nullable=False),
        sa.Column("to_agent", sa.String(length=256), nullable=False),
        sa.Column("note", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["context_id"],
            ["feature_contexts.id"],
            name=op.f("fk_feature_handovers_context_id_feature_contexts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_feature_handovers_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_feature_handovers")),
    )
    with op.batch_alter_table("feature_handovers", schema=None) as batch_op:
        batch_op.create_index(
            "ix_feature_handovers_context", ["context_id", "position"], unique=False
        )
        batch_op.create_index(
            "ix_feature_handovers_project_feature",
            ["project_id", "feature_id", "timestamp", "id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_feature_handovers_project_from",
            ["project_id", "from_agent", "timestamp", "id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_feature_handovers_project_timestamp",
            ["project_id", "timestamp", "id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_feature_handovers_project_to",
            ["project_id", "to_agent", "timestamp", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("feature_handovers", schema=None) as batch_op:
        batch_op.drop_index("ix_feature_handovers_project_to")
        batch_op.drop_index("ix_feature_handovers_project_timestamp")
        batch_op.drop_index("ix_feature_handovers_project_from")
        batch_op.drop_index("ix_feature_handovers_project_feature")
        batch_op.drop_index("ix_feature_handovers_context")

    op.drop_table("feature_handovers")
    with op.batch_alter_table("feature_contexts", schema=None) as batch_op:
        batch_op.drop_index("ix_feature_contexts_project_phase")
        batch_op.drop_index("ix_feature_contexts_project_intervention")
        batch_op.drop_index("ix_feature_contexts_project_created")

    op.drop_table("feature_contexts")
