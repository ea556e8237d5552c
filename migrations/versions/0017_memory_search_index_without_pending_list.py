"""memory's full-text index on PostgreSQL written at each insert

PostgreSQL's GIN index over the memory items' search text (``ix_memory_items_search``, made by
0007) kept new entries in a pending list (``fastupdate``, on by default), which the insert that
fills it (``gin_pending_list_limit``, 4 MB) moves into the index while its client waits, unless
autovacuum got there first. 20,000 decisions posted one after another had writes of 72-91 ms
at the 8,538th and the 17,277th in each of three runs, and none there with the list off, with
no more time in all (2026-11-27, in process, PostgreSQL beside the server on one core). Off,
each insert writes its entries into the index. The entries already pending are moved in now,
since nothing but a vacuum would move them once the list is off. SQLite's FTS5 table is
untouched.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 09:10:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER INDEX ix_memory_items_search SET (fastupdate = off)")
    op.execute("SELECT gin_clean_pending_list('ix_memory_items_search')")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER INDEX ix_memory_items_search RESET (fastupdate)")
