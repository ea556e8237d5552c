"""project memory

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21 23:47:38.349365
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# Full-text search over memory_items.search_text. Neither form can be declared in the models
# for both databases, so migrations/env.py leaves these names out of autogenerate.
SQLITE_FTS = [
    "CREATE VIRTUAL TABLE memory_items_fts USING fts5("
    "search_text, content='memory_items', content_rowid='id')",
    "CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    "CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF search_text ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO memory_items_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
]
SQLITE_FTS_DROP = [
    "DROP TRIGGER IF EXISTS memory_items_fts_update",
    "DROP TRIGGER IF EXISTS memory_items_fts_delete",
    "DROP TRIGGER IF EXISTS memory_items_fts_insert",
    "DROP TABLE IF EXISTS memory_items_fts",
]
# The queries use the same expression, so PostgreSQL answers them from this index.
POSTGRES_FTS = [
    "CREATE INDEX ix_memory_items_search ON memory_items "
    "USING gin (to_tsvector('simple', search_text))",
]
POSTGRES_FTS_DROP = ["DROP INDEX IF EXISTS ix_memory_items_search"]


def _execute(sqlite: list[str], postgresql: list[str]) -> None:
    for statement in sqlite if op.get_bind().dialect.name == "sqlite" else postgresql:
        op.execute(statement)


revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_file_styles",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("style", sa.String(length=8), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_memory_file_styles_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_file_styles")),
        sa.UniqueConstraint(
            "project_id", "kind", name=op.f("uq_memory_file_styles_project_id_kind")
        ),
    )
    op.create_table(
        "memory_items",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("item_id", sa.String(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("feature_id", sa.String(), nullable=True),
        sa.Column("category", sa.String(), nullable=True),
        sa.Column("severity", sa.String(), nullable=True),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("resolved", sa.Boolean(), nullable=False),
        sa.Column("features_mark", sa.BigInteger(), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_memory_items_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_items")),
        sa.UniqueConstraint(
            "project_id", "kind", "item_id", name=op.f("uq_memory_items_project_id_kind_item_id")
        ),
    )
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.create_index(
            "ix_memory_items_project_kind_category",
            ["project_id", "kind", "category"],
            unique=False,
        )
        batch_op.create_index(
            "ix_memory_items_project_kind_feature",
            ["project_id", "kind", "feature_id"],
            unique=False,
        )
        batch_op.create_index(
            "ix_memory_items_project_kind_position",
            ["project_id", "kind", "position"],
            unique=False,
        )
        batch_op.create_index(
            "ix_memory_items_project_kind_severity",
            ["project_id", "kind", "severity"],
            unique=False,
        )
        batch_op.create_index(
            "ix_memory_items_project_kind_timestamp",
            ["project_id", "kind", "timestamp", "id"],
            unique=False,
        )

    _execute(SQLITE_FTS, POSTGRES_FTS)

    op.create_table(
        "memory_summaries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("style", sa.String(length=8), nullable=False),
        sa.Column("content_tokens", sa.BigInteger(), nullable=False),
        sa.Column("total_features_completed", sa.BigInteger(), nullable=True),
        sa.Column("etag", sa.String(length=40), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"],
            ["projects.id"],
            name=op.f("fk_memory_summaries_project_id_projects"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_summaries")),
        sa.UniqueConstraint("project_id", name=op.f("uq_memory_summaries_project_id")),
    )


def downgrade() -> None:
    _execute(SQLITE_FTS_DROP, POSTGRES_FTS_DROP)
    op.drop_table("memory_summaries")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_items_project_kind_timestamp")
        batch_op.drop_index("ix_memory_items_project_kind_severity")
        batch_op.drop_index("ix_memory_items_project_kind_position")
        batch_op.drop_index("ix_memory_items_project_kind_feature")
        batch_op.drop_index("ix_memory_items_project_kind_category")

    op.drop_table("memory_items")
    op.drop_table("memory_file_styles")
