"""idempotency_keys.body_form: what a stored answer's body is when it is not the answer's own

An Idempotency-Key stored its route's whole first answer: a tenant's 2-byte resumes of a 30 MB
save stored 34 MB each, and grew SQLite's database by a GB in 15 s (2026-11-27). An answer over
the body limit is now stored by a reference to the document it carries (``reference``: a
resume's save, rebuilt on a replay) or compressed (``gzip``); null is the body as it was sent,
which every row stored before this revision is. The downgrade deletes the rows whose body is
not the answer's own: the code before this revision would replay their reference or their
gzip as the answer.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 20:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# No batch mode (as 0011): adding and dropping a column need no rebuild of the table.


def upgrade() -> None:
    op.add_column("idempotency_keys", sa.Column("body_form", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.execute("DELETE FROM idempotency_keys WHERE body_form IS NOT NULL")
    op.drop_column("idempotency_keys", "body_form")
