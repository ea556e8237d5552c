"""Every test that touches the database runs twice: on SQLite and on PostgreSQL.

Each test run creates its own databases (a temporary SQLite file; a new PostgreSQL database
per xdist worker, dropped at the end), migrated with ``alembic upgrade head``. Tests talk to
the real app over HTTP through httpx (Starlette's TestClient is an httpx client). Each test
gets a tenant of its own, so tests never see each other's data.

PostgreSQL: ``CONTEXT_STORE_TEST_POSTGRES_URL`` (default: postgres@127.0.0.1:5432/test) names
a database to connect to in order to create the test databases. When it is unreachable the
PostgreSQL half is skipped, except with ``CI=true``, where it fails.
"""

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import settings as hypothesis_settings
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from app.core.config import AuthMode, Settings
from app.core.db import session_scope
from app.core.migrations import upgrade
from app.core.security import Scope
from app.keys import service as keys
from app.main import create_app
from tests.helpers import wait_for_the_deleter

# Property tests are repeatable: derandomized, with no example database carried between runs.
hypothesis_settings.register_profile("suite", derandomize=True, database=None, deadline=None)
hypothesis_settings.load_profile("suite")

POSTGRES_ADMIN_URL = os.environ.get(
    "CONTEXT_STORE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _postgres_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _require_postgres() -> None:
    try:
        with psycopg.connect(_postgres_dsn(POSTGRES_ADMIN_URL), connect_timeout=3):
            pass
    except psycopg.OperationalError as exc:
        message = (
            f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL} ({exc}). Start it, or point "
            "CONTEXT_STORE_TEST_POSTGRES_URL at a database this user may CREATE DATABASE from."
        )
        if IN_CI:
            pytest.fail("CI=true requires the PostgreSQL tests: " + message, pytrace=False)
        pytest.skip(message)


class PostgresDatabases:
    """Creates fresh databases next to the admin database, and drops them at the end."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def create(self, worker: str) -> str:
        name = f"cs_test_{worker}_{secrets.token_hex(4)}"
        with psycopg.connect(_postgres_dsn(POSTGRES_ADMIN_URL), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with psycopg.connect(_postgres_dsn(POSTGRES_ADMIN_URL), autocommit=True) as connection:
            for name in self.created:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def worker_id_label() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases()
    yield databases
    if databases.created:
        databases.drop_all()


@pytest.fixture
def own_postgres_url(postgres_databases: PostgresDatabases, worker_id_label: str) -> str:
    """A migrated PostgreSQL database of the test's own, so that every connection to it is the
    app's: for tests that end those connections. PostgreSQL only: SQLite has none to lose."""
    _require_postgres()
    url = postgres_databases.create(worker_id_label)
    upgrade(url)
    return url


def end_server_processes(database_url: str) -> int:
    """Ends every PostgreSQL server process of the database (an administrator's
    pg_terminate_backend): the connections the app holds to it, in use or idle, die."""
    with psycopg.connect(_postgres_dsn(POSTGRES_ADMIN_URL), autocommit=True) as admin:
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (make_url(database_url).database,),
        ).fetchall()
    return len(ended)


@dataclass
class Backend:
    name: str
    postgres: PostgresDatabases | None
    tmp: Path
    worker: str

    def new_database_url(self) -> str:
        """An empty database of this backend, not yet migrated."""
        if self.postgres is not None:
            return self.postgres.create(self.worker)
        return f"sqlite:///{self.tmp / (secrets.token_hex(4) + '.db')}"


@pytest.fixture(
    scope="session",
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def backend(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_databases: PostgresDatabases,
    worker_id_label: str,
) -> Backend:
    if request.param == "postgresql":
        _require_postgres()
        return Backend(
            "postgresql", postgres_databases, tmp_path_factory.mktemp("pg"), worker_id_label
        )
    return Backend("sqlite", None, tmp_path_factory.mktemp("sqlite"), worker_id_label)


@pytest.fixture(scope="session")
def database_url(backend: Backend) -> str:
    url = backend.new_database_url()
    upgrade(url)
    return url


def make_settings(database_url: str, **overrides: object) -> Settings:
    values = {"database_url": database_url, "auth": AuthMode.on} | overrides
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def app(database_url: str) -> Iterator[FastAPI]:
    application = create_app(make_settings(database_url))
    with TestClient(application):  # runs the lifespan: the engines live for the session
        yield application


@pytest.fixture(autouse=True)
def _deletes_end_with_their_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A deleted project's rows go after the delete's answer (app/projects/service.py): a test
    of the session app ends once its deletes have, so that no delete's batches run into the
    next test (one that counts the writer's statements, or holds the deleter)."""
    yield
    if "app" in request.fixturenames:
        wait_for_the_deleter(request.getfixturevalue("app"))


@pytest.fixture
def engine(app: FastAPI) -> Engine:
    """Direct access to the database, to check what the API stored: the app's writer as it
    is for this test (a test that enters the session app's lifespan again gives it a database
    of its own, whose engines the app then writes through)."""
    writer: Engine = app.state.database.writer
    return writer


def create_key(app: FastAPI, tenant: str, *scopes: Scope) -> str:
    with session_scope(app.state.database.write_session()) as session:
        return keys.create_key(session, tenant, frozenset(scopes or tuple(Scope))).secret


def client_for(app: FastAPI, key: str | None, **kwargs: object) -> TestClient:
    """A client of the app. It asks for uncompressed responses unless a test says otherwise,
    so that ETags compare as sent (a gzip response has an ETag of its own)."""
    headers = {"Accept-Encoding": "identity"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return TestClient(app, headers=headers, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def tenant() -> str:
    return "t-" + secrets.token_hex(6)


@pytest.fixture
def client(app: FastAPI, tenant: str) -> TestClient:
    """A client holding a read, write and admin key for this test's own tenant."""
    return client_for(app, create_key(app, tenant))


@pytest.fixture
def other_client(app: FastAPI) -> TestClient:
    """A client of another tenant, with every scope."""
    return client_for(app, create_key(app, "t-" + secrets.token_hex(6)))


@pytest.fixture
def project() -> str:
    return "proj-" + secrets.token_hex(4)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures the reliability tests record (``user_properties``), summed over the run."""
    totals: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if isinstance(value, int):
                    totals[name] = totals.get(name, 0) + value
    if totals:
        terminalreporter.section("reliability figures")
        for name, value in sorted(totals.items()):
            terminalreporter.write_line(f"{name}: {value}")
