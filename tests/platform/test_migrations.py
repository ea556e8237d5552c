"""One linear migration history that builds exactly the models' schema on both databases."""

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from app.core.migrations import alembic_config, downgrade, upgrade
from tests.helpers import import_save, seed_save


def test_there_is_a_single_head():
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"several migration heads: {heads}"


def test_the_models_match_the_migrations(database_url):
    # Raises when autogenerate would find anything to add, drop or alter.
    command.check(alembic_config(database_url))


def test_downgrade_to_base_with_data_and_upgrade_again(backend, tenant):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import client_for, create_key, make_settings

    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert import_save(client, "p", seed_save()).status_code == 201
    downgrade(url, "base")
    engine = create_engine(url)
    try:
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(url)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM saves")).scalar_one() == 0
    finally:
        engine.dispose()
