"""a feature's items read newest first from an index

The context pack ranks a feature's own newest failures (``app/memory/service.py``). Its index
held ``(project_id, kind, feature_id)`` only: the read found every failure of the feature and
sorted them (SQLite: "USE TEMP B-TREE FOR ORDER BY"), so the pack grew with the feature's
failures (500 of them at the benchmark's million items: 1.6 ms of a 10 ms pack). With
``timestamp`` and ``id`` after them, as the project-wide index has, it reads the newest
from the index's end and stops at the limit.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 01:45:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "ix_memory_items_project_kind_feature"
NEW = "ix_memory_items_project_kind_feature_timestamp"


# No batch mode (as 0011 and 0013): an index needs no table rebuild on SQLite.
def upgrade() -> None:
    op.create_index(
        NEW, "memory_items", ["project_id", "kind", "feature_id", "timestamp", "id"], unique=False
    )
    op.drop_index(OLD, table_name="memory_items")


def downgrade() -> None:
    op.create_index(OLD, "memory_items", ["project_id", "kind", "feature_id"], unique=False)
    op.drop_index(NEW, table_name="memory_items")
