"""run states: updated_at is when the service stored the state

Every table that stores a document names the time it last changed ``updated_at``
(``app/core/documents.py``); run states called it ``modified_at`` and held the document's own
``updated_at`` field, a string as atari wrote it, in ``updated_at``. That copy becomes
``state_updated_at``, then ``modified_at`` becomes ``updated_at``. Only names change: no value
is rewritten, and the API still shows them as ``updated_at`` and ``modified_at``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-22 20:00:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# RENAME COLUMN on both databases (SQLite 3.25+): no batch mode, whose table rebuild would
# delete the counted sessions through their foreign key. An index follows its column's new
# name; its own name is changed by dropping and creating it (SQLite cannot rename an index).


def _rename(old: str, new: str) -> None:
    op.alter_column("run_states", old, new_column_name=new)


def upgrade() -> None:
    op.drop_index("ix_run_states_project_modified", table_name="run_states")
    _rename("updated_at", "state_updated_at")
    _rename("modified_at", "updated_at")
    op.create_index(
        "ix_run_states_project_updated", "run_states", ["project_id", "updated_at", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_run_states_project_updated", table_name="run_states")
    _rename("updated_at", "modified_at")
    _rename("state_updated_at", "updated_at")
    op.create_index(
        "ix_run_states_project_modified", "run_states", ["project_id", "modified_at", "id"]
    )
