"""memory's full-text index on SQLite keyed by project

SQLite's one FTS5 table held every tenant's items by their words alone, so a search read every
match of its words, in every project, before the outer query kept its own project's: its time
grew with other tenants' matches, which a tenant could time (a word 30,000 of another tenant's
decisions held: 6.3 ms, against 2.0 for a word none held, both answering nothing; 2026-11-27).
The table now also indexes each item's ``project_id`` (its own column, read from
``memory_items`` as ``search_text`` is), and a search matches the project's id in that column
with its words in ``search_text`` (``app/memory/repository.py``): FTS5 steps through the
shorter of the lists, so another project's matches are skipped over, not read. The table is
made again and filled from ``memory_items`` (FTS5's ``rebuild``); the downgrade makes the one
before. PostgreSQL's GIN index is untouched: its search showed no such gap.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 16:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DROP = [
    "DROP TRIGGER IF EXISTS memory_items_fts_update",
    "DROP TRIGGER IF EXISTS memory_items_fts_delete",
    "DROP TRIGGER IF EXISTS memory_items_fts_insert",
    "DROP TABLE IF EXISTS memory_items_fts",
]


def _index(columns: list[str]) -> list[str]:
    """The FTS5 table over ``columns`` of ``memory_items``, the triggers that keep it, and its
    filling from the rows already there."""
    names = ", ".join(columns)
    new = ", ".join(f"new.{column}" for column in columns)
    old = ", ".join(f"old.{column}" for column in columns)
    forget = f"INSERT INTO memory_items_fts(memory_items_fts, rowid, {names}) "
    forget += f"VALUES ('delete', old.id, {old});"
    remember = f"INSERT INTO memory_items_fts(rowid, {names}) VALUES (new.id, {new});"
    return [
        f"CREATE VIRTUAL TABLE memory_items_fts USING fts5({names}, "
        "content='memory_items', content_rowid='id')",
        f"CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN {remember} END",
        f"CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN {forget} END",
        f"CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF {names} ON memory_items "
        f"BEGIN {forget} {remember} END",
        "INSERT INTO memory_items_fts(memory_items_fts) VALUES ('rebuild')",
    ]


def _make(columns: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in DROP + _index(columns):
        op.execute(statement)


def upgrade() -> None:
    _make(["search_text", "project_id"])


def downgrade() -> None:
    _make(["search_text"])
