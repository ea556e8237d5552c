"""save numbers per project

A save's id in the API becomes its number within its project (1, 2, 3...): the primary key is
one sequence across tenants and told each tenant how many saves the others stored. The
project counts the numbers it gave (``last_save_number``), so that a deleted save's number is
never given again. Existing saves are numbered in their primary key's order, per project.
Downgrading drops the numbers; the primary keys were never changed.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-22 17:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# No batch mode: on SQLite it rebuilds a table, and dropping the old one with foreign keys on
# deletes what refers to it (every resource of a project, every phase status of a save).
# Adding a column, dropping one (SQLite 3.35+) and indexes need no rebuild.


def upgrade() -> None:
    op.add_column(
        "projects",
        sa.Column("last_save_number", sa.BigInteger(), server_default="0", nullable=False),
    )
    # NOT NULL needs a default on SQLite's ADD COLUMN; every row is numbered just below.
    op.add_column("saves", sa.Column("number", sa.BigInteger(), server_default="0", nullable=False))
    # ROW_NUMBER() runs on both databases (SQLite since 3.25).
    op.execute(
        "UPDATE saves SET number = (SELECT numbered.n FROM (SELECT id, ROW_NUMBER() OVER "
        "(PARTITION BY project_id ORDER BY id) AS n FROM saves) AS numbered "
        "WHERE numbered.id = saves.id)"
    )
    op.execute(
        "UPDATE projects SET last_save_number = COALESCE("
        "(SELECT MAX(number) FROM saves WHERE saves.project_id = projects.id), 0)"
    )
    if op.get_bind().dialect.name == "postgresql":
        # SQLite cannot drop a column's default without a rebuild; the app always sets it.
        op.alter_column("saves", "number", server_default=None)
    op.create_index("ix_saves_project_number", "saves", ["project_id", "number"], unique=True)
    op.drop_index("ix_saves_project_timestamp", table_name="saves")
    op.create_index("ix_saves_project_timestamp", "saves", ["project_id", "timestamp", "number"])


def downgrade() -> None:
    op.drop_index("ix_saves_project_timestamp", table_name="saves")
    op.create_index("ix_saves_project_timestamp", "saves", ["project_id", "timestamp", "id"])
    op.drop_index("ix_saves_project_number", table_name="saves")
    op.drop_column("saves", "number")
    op.drop_column("projects", "last_save_number")
