"""platform and saves

Revision ID: 0001
Revises:
Create Date: 2026-11-21 23:31:24.599989
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("scopes", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant"), ["tenant"], unique=False)

    op.create_table(
        "idempotency_keys",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("headers", sa.JSON(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "key", name=op.f("pk_idempotency_keys")),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_idempotency_keys_expires_at"), ["expires_at"], unique=False
        )

    op.create_table(
        "projects",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_write_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("tenant", "name", name=op.f("uq_projects_tenant_name")),
    )
    op.create_table(
        "saves",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("timestamp", sa.DateTime(timezone=True), nullable=False),
        sa.Column("filename", sa.String(length=64), nullable=False),
        sa.Column("project_name", sa.String(), nullable=False),
        sa.Column("current_phase", sa.String(), nullable=False),
        sa.Column("all_phases_complete", sa.Boolean(), nullable=False),
        sa.Column("token_total", sa.Float(), nullable=False),
        sa.Column("token_limit", sa.Float(), nullable=False),
        sa.Column("token_percentage", sa.Float(), nullable=False),
        sa.Column("save_count", sa.BigInteger(), nullable=False),
        sa.Column("resume_count", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("content_gzipped", sa.Boolean(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_saves_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_saves")),
    )
    with op.batch_alter_table("saves", schema=None) as batch_op:
        batch_op.create_index(
            "ix_saves_project_current_phase", ["project_id", "current_phase"], unique=False
        )
        batch_op.create_index("ix_saves_project_name", ["project_id", "project_name"], unique=False)
        batch_op.create_index(
            "ix_saves_project_timestamp", ["project_id", "timestamp", "id"], unique=False
        )
        batch_op.create_index(
            "ix_saves_project_token_percentage", ["project_id", "token_percentage"], unique=False
        )

    op.create_table(
        "save_phase_statuses",
        sa.Column("save_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("phase", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["save_id"],
            ["saves.id"],
            name=op.f("fk_save_phase_statuses_save_id_saves"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("save_id", "phase", name=op.f("pk_save_phase_statuses")),
    )
    with op.batch_alter_table("save_phase_statuses", schema=None) as batch_op:
        batch_op.create_index(
            "ix_save_phase_statuses_phase_status", ["phase", "status"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("save_phase_statuses", schema=None) as batch_op:
        batch_op.drop_index("ix_save_phase_statuses_phase_status")

    op.drop_table("save_phase_statuses")
    with op.batch_alter_table("saves", schema=None) as batch_op:
        batch_op.drop_index("ix_saves_project_token_percentage")
        batch_op.drop_index("ix_saves_project_timestamp")
        batch_op.drop_index("ix_saves_project_name")
        batch_op.drop_index("ix_saves_project_current_phase")

    op.drop_table("saves")
    op.drop_table("projects")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotency_keys_expires_at"))

    op.drop_table("idempotency_keys")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_tenant"))

    op.drop_table("api_keys")
