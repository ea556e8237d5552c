"""save numbers and names

The listing's numbers of a save may be NULL: the file's value (NaN, an infinity, an integer
past 64 bits or past a double's precision) is kept in the file, and a column that cannot hold
it exactly holds nothing. An index finds a project's save by its file name (an archive
import recognises a file it already has). Downgrading writes 0 where a number is NULL.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-22 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NUMBERS = {
    "token_total": sa.Float(),
    "token_limit": sa.Float(),
    "token_percentage": sa.Float(),
    "save_count": sa.BigInteger(),
    "resume_count": sa.BigInteger(),
}


def _set_nullable(nullable: bool) -> None:
    with op.batch_alter_table("saves", schema=None) as batch_op:
        for name, column_type in NUMBERS.items():
            batch_op.alter_column(name, existing_type=column_type, nullable=nullable)


def upgrade() -> None:
    _set_nullable(True)
    with op.batch_alter_table("saves", schema=None) as batch_op:
        batch_op.create_index("ix_saves_project_filename", ["project_id", "filename"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("saves", schema=None) as batch_op:
        batch_op.drop_index("ix_saves_project_filename")
    saves = sa.table("saves", *(sa.column(name) for name in NUMBERS))
    for name in NUMBERS:
        op.execute(saves.update().where(saves.c[name].is_(None)).values({name: 0}))
    _set_nullable(False)
