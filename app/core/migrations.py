"""Alembic, driven from code: the CLI, the readiness probe and the tests use this."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(database_url: str | None = None, *, configure_logging: bool = True) -> Config:
    config = Config(str(PROJECT_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    # Passed as an attribute rather than an ini option: URLs may hold '%', which ini
    # interpolation would choke on.
    config.attributes["database_url"] = database_url
    # False when the caller has set up logging itself (the JSON logs of `context-store migrate`).
    config.attributes["configure_logging"] = configure_logging
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations have no head"
    return head


def upgrade(database_url: str, revision: str = "head", *, configure_logging: bool = True) -> None:
    command.upgrade(alembic_config(database_url, configure_logging=configure_logging), revision)


def downgrade(database_url: str, revision: str) -> None:
    command.downgrade(alembic_config(database_url), revision)


def current_revision(engine: Engine) -> str | None:
    """The migration the database is at; None when it was never migrated. Raises
    SQLAlchemyError when the database cannot be reached."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def not_migrated_reason(current: str | None, head: str) -> str | None:
    """What to tell someone whose database is not at this release's schema (None when it is)."""
    if current == head:
        return None
    found = "has never been migrated" if current is None else f"is at migration {current!r}"
    return f"The database {found}; this release needs {head!r}. Run `context-store migrate`."
