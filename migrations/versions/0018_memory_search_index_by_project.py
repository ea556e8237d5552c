"""memory's full-text index on SQLite keyed by project

SQLite's one FTS5 table held every tenant's items by their words alone, so a search read every
match of its words, in every project, before the outer query kept its own project's: its time
grew with other tenants' matches, which a tenant could time (a word 30,000 of another tenant's
decisions held: 6.3 ms, against 2.0 for a word none held, both answering nothing; 2026-11-27).

Each item is now indexed under a key that puts its project first, ``project_id * 2**32 + id``
(``PROJECT_RANGE`` in ``app/memory/repository.py``), so a project's items take one range of the
index's row ids, and a search
reads only its project's range of each word's list (FTS5 seeks to a range's start through the
list's own index: ``app/memory/repository.py``). A token for the project, matched with the
words, was tried first: FTS5 keeps one list a token whatever its column, so another tenant's
text holding the project's number was read all the same, and a project of many items still
stepped through another tenant's matches between its own. The key is no column of
``memory_items``, so the table is contentless (``content=''``): the triggers give it each
item's key and text, and take them back by the same values; it is filled here from the items
already stored. Its bounds (projects numbered below 2**31, items below 2**32) are checked by
the insert trigger, which refuses an item beyond them rather than index it under another
project's range. The downgrade makes the table before, filled by FTS5's ``rebuild``.
PostgreSQL's GIN index is untouched: its plans read the project's own items first.

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


def _key(row: str) -> str:
    return f"({row}.project_id << 32) + {row}.id"


_FORGET = (
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    f"VALUES ('delete', {_key('old')}, old.search_text);"
)
_REMEMBER = (
    f"INSERT INTO memory_items_fts(rowid, search_text) VALUES ({_key('new')}, new.search_text);"
)
_IN_BOUNDS = (
    "SELECT RAISE(ABORT, 'memory_items_fts: project or item id beyond the search key') "
    "WHERE new.project_id NOT BETWEEN 0 AND 2147483647 OR new.id NOT BETWEEN 0 AND 4294967295;"
)
BY_PROJECT = [
    "CREATE VIRTUAL TABLE memory_items_fts USING fts5(search_text, content='')",
    "CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items "
    f"BEGIN {_IN_BOUNDS} {_REMEMBER} END",
    f"CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN {_FORGET} END",
    "CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF search_text, project_id "
    f"ON memory_items BEGIN {_FORGET} {_REMEMBER} END",
    "INSERT INTO memory_items_fts(rowid, search_text) "
    f"SELECT {_key('memory_items')}, search_text FROM memory_items",
]
# 0007's table: an item's words under its own id, its text read from memory_items.
BY_ITEM = [
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
    "INSERT INTO memory_items_fts(memory_items_fts) VALUES ('rebuild')",
]


def _make(statements: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in DROP + statements:
        op.execute(statement)


def upgrade() -> None:
    _make(BY_PROJECT)


def downgrade() -> None:
    _make(BY_ITEM)
