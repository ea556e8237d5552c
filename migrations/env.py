"""Alembic environment: one linear history for SQLite and PostgreSQL."""

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import create_engine, pool
from sqlmodel.sql.sqltypes import AutoString

from app import models  # noqa: F401  (registers every table on the metadata)
from app.core.config import Settings
from app.core.db import SearchableText, UTCDateTime, ensure_sqlite_directory, metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = config.attributes.get("database_url")
    return url if url else Settings().database_url


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | bool:
    """Migrations name plain SQLAlchemy types only, never the app's, so that an old
    migration keeps working whatever later happens to ``app``."""
    if type_ != "type":
        return False
    if isinstance(obj, AutoString):
        return f"sa.String(length={obj.length})" if obj.length else "sa.String()"
    if isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    if isinstance(obj, SearchableText):
        return "sa.String()"
    return False


# Created by raw DDL in the migrations (full-text search), absent from the models by design.
# PostgreSQL's index is over the functions memory_search_lexemes and memory_search_query
# (0018), which autogenerate never compares: functions are no objects of the metadata.
UNMANAGED_PREFIXES = ("memory_items_fts",)
UNMANAGED_INDEXES = frozenset({"ix_memory_items_search"})


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Keep autogenerate (and ``alembic check``) away from the full-text search objects."""
    if name is None:
        return True
    if type_ == "table" and name.startswith(UNMANAGED_PREFIXES):
        return False
    return not (type_ == "index" and name in UNMANAGED_INDEXES)


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=metadata,
        literal_binds=True,
        render_as_batch=True,
        render_item=render_item,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    ensure_sqlite_directory(database_url())
    engine = create_engine(database_url(), poolclass=pool.NullPool)
    # SQLite's foreign keys stay off while migrating (its default): batch mode alters a table
    # by dropping and re-creating it, and with them on the drop would cascade into every table
    # that refers to it. What the steps leave is checked below instead.
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
            render_as_batch=True,
            render_item=render_item,
            include_object=include_object,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()
            if engine.dialect.name == "sqlite":
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise RuntimeError(f"the migration left rows that refer to nothing: {broken}")
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
