"""a handover's position unique within its context

A note's position is one past its context's last (``app/features/service.py``), read with the
context's row while the write holds its project's lock, so that no two notes of a context
share one. The index over ``(context_id, position)`` now holds the rule too: a write that ever
broke it fails (an integrity error, a 409) instead of storing a note at another's place, where
the context's document would read the two in no set order. Positions that share one already,
which no release meant to write, are numbered again first, in the order a read gives them
(position, then id), which leaves every document's notes where they were.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 01:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_feature_handovers_context"
COLUMNS = ["context_id", "position"]

handovers = sa.table(
    "feature_handovers",
    sa.column("id", sa.BigInteger()),
    sa.column("context_id", sa.BigInteger()),
    sa.column("position", sa.BigInteger()),
)


def _number_shared_positions_again() -> None:
    connection = op.get_bind()
    shared = connection.execute(
        sa.select(handovers.c.context_id)
        .group_by(handovers.c.context_id, handovers.c.position)
        .having(sa.func.count() > 1)
        .distinct()
    ).scalars()
    for context_id in list(shared):
        ids = connection.execute(
            sa.select(handovers.c.id)
            .where(handovers.c.context_id == context_id)
            .order_by(handovers.c.position, handovers.c.id)
        ).scalars()
        for position, handover_id in enumerate(list(ids)):
            connection.execute(
                handovers.update().where(handovers.c.id == handover_id).values(position=position)
            )


# No batch mode (as 0011, 0013 and 0014): an index needs no table rebuild on SQLite.
def upgrade() -> None:
    _number_shared_positions_again()
    op.drop_index(INDEX, table_name="feature_handovers")
    op.create_index(INDEX, "feature_handovers", COLUMNS, unique=True)


def downgrade() -> None:
    op.drop_index(INDEX, table_name="feature_handovers")
    op.create_index(INDEX, "feature_handovers", COLUMNS, unique=False)
