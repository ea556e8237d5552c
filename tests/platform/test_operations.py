"""Health, readiness, metrics, offline Swagger UI, and the committed OpenAPI document."""

import re
import threading
import time

import httpx
import pytest
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app import openapi
from app.core.config import AuthMode
from app.core.db import DB_POOL_MARGIN
from app.core.migrations import alembic_config, head_revision, upgrade
from app.main import create_app
from tests.conftest import make_settings
from tests.helpers import (
    LOOPBACK,
    assert_problem,
    import_save,
    seed_save,
    wait_for_the_deleter,
)
from tests.platform.world import World, api_routes, send


def test_healthz_needs_no_key(app):
    response = TestClient(app).get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_reports_the_database_and_migration(app, backend):
    response = TestClient(app).get("/readyz")
    assert response.status_code == 200
    assert response.json()["database"] == backend.name
    assert response.json()["migration"] == app.state.migration_head


def test_readyz_is_503_on_an_unmigrated_database(backend):
    with TestClient(create_app(make_settings(backend.new_database_url()))) as unmigrated:
        response = unmigrated.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.headers["retry-after"]
        assert "context-store migrate" in response.json()["detail"]


def _assert_names_migrate(response: httpx.Response) -> None:
    problem = assert_problem(response, 503)
    assert problem["type"] == "urn:context-store:problem:database-not-migrated", problem
    assert "context-store migrate" in problem["detail"], problem
    assert response.headers["retry-after"]


def test_every_route_on_an_unmigrated_database_answers_503_naming_migrate(backend):
    """Each route's own queries (auth off, so that no key lookup answers first)."""
    app = create_app(make_settings(backend.new_database_url(), auth=AuthMode.off))
    world = World(project="demo", save_id=1, key_id="0123456789abcdef")
    with TestClient(app, base_url=LOOPBACK) as unmigrated:
        for route in api_routes(app):
            response = send(unmigrated, world, route)
            assert response.status_code == 503, (route, response.text)
            _assert_names_migrate(response)


def test_a_key_on_an_unmigrated_database_answers_503_naming_migrate(backend):
    with TestClient(create_app(make_settings(backend.new_database_url()))) as unmigrated:
        _assert_names_migrate(
            unmigrated.get("/v1/projects", headers={"Authorization": "Bearer cs_unknown"})
        )


def test_a_table_missing_from_a_migrated_database_is_a_server_error_not_a_migration(backend):
    url = backend.new_database_url()
    upgrade(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("DROP TABLE feature_handovers"))
    engine.dispose()
    with TestClient(create_app(make_settings(url, auth=AuthMode.off)), base_url=LOOPBACK) as broken:
        created = broken.post("/v1/projects/demo/features", json={"feature_id": "f"})
        assert created.status_code == 201, created.text
        response = broken.get("/v1/projects/demo/handovers")
        assert assert_problem(response, 500)["type"] == "urn:context-store:problem:internal-error"


def test_a_database_behind_the_head_answers_503_naming_migrate_where_it_lacks_a_change(backend):
    """A database one migration behind, then two, three, four, five and six, until a probe
    touches what it lacks: each refused answer names migrate and the revision the database is
    at. A migration that only changes an index (0014, 0015, 0017) or stored values (0016: the
    saves' tags) leaves every request able to run, so one step below it answers them all; its
    readiness is 503 all the same, naming the revision."""
    script = ScriptDirectory.from_config(alembic_config())
    revision = head_revision()
    for _step in range(6):
        below = script.get_revision(revision).down_revision
        assert isinstance(below, str)
        revision = below
        url = backend.new_database_url()
        upgrade(url, revision)
        settings = make_settings(url, auth=AuthMode.off)
        with TestClient(create_app(settings), base_url=LOOPBACK) as behind:
            readiness = behind.get("/readyz")
            assert readiness.status_code == 503 and revision in readiness.json()["detail"]
            # A write to each table a recent migration changed (saves: 0011, run states:
            # 0012 and 0013, Idempotency-Keys: 0019) and a search (0018: SQLite's index,
            # PostgreSQL's functions); the others may succeed.
            responses = [
                import_save(behind, "demo", seed_save()),
                behind.post("/v1/projects/demo/runs/r/iterations", json={"bead_id": "b"}),
                behind.post(
                    "/v1/projects/demo/memory/decisions",
                    json={"decision": "jwt"},
                    headers={"Idempotency-Key": "probe"},
                ),
                behind.get("/v1/projects/demo/memory/decisions", params={"q": "jwt"}),
            ]
        for response in responses:
            assert response.is_success or response.status_code == 503, response.text
        refused = [response for response in responses if not response.is_success]
        for response in refused:
            _assert_names_migrate(response)
            assert revision in response.json()["detail"]
        if refused:
            return
    pytest.fail("no probe touches what the last six migrations changed")


def test_readyz_is_503_when_the_database_is_unreachable():
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=1"
    with TestClient(create_app(make_settings(url))) as unreachable:
        assert unreachable.get("/readyz").status_code == 503
        assert unreachable.get("/healthz").status_code == 200


def test_metrics_count_requests_by_route_template(client, project):
    client.get(f"/v1/projects/{project}/saves")
    text = TestClient(client.app).get("/metrics").text
    assert re.search(
        r'context_store_http_requests_total\{method="GET",route="/v1/projects/\{project\}/saves",'
        r'status="404"\} [1-9]',
        text,
    ), text
    assert "context_store_http_request_duration_seconds_bucket" in text
    assert project not in text


def test_metrics_count_methods_no_route_answers_as_other(client, project):
    """Each method a client sends would be a series of its own for every route: the methods
    no route answers are one, "other"."""
    for method in ("PROPFIND", "MKCOL", "PURGE"):
        assert client.request(method, f"/v1/projects/{project}/saves").status_code == 405
    text = TestClient(client.app).get("/metrics").text
    assert "PROPFIND" not in text and "MKCOL" not in text and "PURGE" not in text
    counted = re.search(
        r'context_store_http_requests_total\{method="other",route="/v1/projects/\{project\}/saves",'
        r'status="405"\} ([0-9.]+)',
        text,
    )
    assert counted is not None and float(counted.group(1)) >= 3, text


def test_metrics_name_routes_of_nested_routers_by_their_full_template(client, project):
    """The save import is declared on a router included in a prefixed one."""
    assert import_save(client, project, seed_save()).status_code == 201
    text = TestClient(client.app).get("/metrics").text
    assert re.search(
        r'context_store_http_requests_total\{method="POST",route="/v1/projects/\{project\}/saves",'
        r'status="201"\} [1-9]',
        text,
    ), text


def test_swagger_ui_is_served_without_network_assets(app):
    docs = TestClient(app).get("/docs")
    assert docs.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
    assert assets, docs.text
    for asset in assets:
        assert asset.startswith("/"), f"/docs loads {asset} from elsewhere"
        assert TestClient(app).get(asset).status_code == 200, asset
    assert "https://" not in docs.text and "http://" not in docs.text
    assert TestClient(app).get("/openapi.json").status_code == 200


def test_the_committed_openapi_document_is_current():
    committed = openapi.SPEC_PATH.read_text(encoding="utf-8")
    assert committed == openapi.render(openapi.current_spec()), "run `make openapi`"


def test_the_openapi_document_is_what_the_service_serves(app):
    assert TestClient(app).get("/openapi.json").json() == openapi.current_spec()


def _pool_gauges(app) -> dict[tuple[str, str], float]:
    text = TestClient(app).get("/metrics").text
    found = re.findall(r'context_store_db_pool_(\w+)\{pool="(\w+)"\} ([0-9.e+-]+)', text)
    return {(pool, gauge): float(value) for gauge, pool, value in found}


def test_metrics_report_each_connection_pool_as_it_is_when_scraped(app, backend):
    gauges = _pool_gauges(app)
    if backend.name == "sqlite":
        assert gauges[("writer", "size")] == 1
        pool, engine = "reader", app.state.database.reader
    else:
        assert {name for name, _ in gauges} == {"shared"}
        pool, engine = "shared", app.state.database.reader
    size = int(gauges[(pool, "size")])
    assert gauges[(pool, "checked_out")] == 0 and gauges[(pool, "overflow")] == 0

    connections = [engine.connect() for _ in range(size + 1)]
    try:
        held = _pool_gauges(app)
    finally:
        for connection in connections:
            connection.close()
    assert held[(pool, "checked_out")] == size + 1
    assert held[(pool, "overflow")] == 1
    assert held[(pool, "checked_in")] == 0

    released = _pool_gauges(app)
    assert released[(pool, "checked_out")] == 0 and released[(pool, "overflow")] == 0
    assert released[(pool, "checked_in")] == size


def test_metrics_count_requests_in_flight(app):
    text = TestClient(app).get("/metrics").text
    # The scrape itself is the one GET in flight while the page is written.
    assert 'context_store_http_requests_in_progress{method="GET"} 1.0' in text


def test_metrics_show_requests_queueing_for_threads_connections_and_exports(client, project):
    assert import_save(client, project, seed_save()).status_code == 201
    text = TestClient(client.app).get("/metrics").text
    threads = client.app.state.settings.worker_threads
    assert f"context_store_worker_threads_limit {float(threads)}" in text
    assert re.search(r"^context_store_worker_threads_busy \d", text, re.MULTILINE)
    assert "context_store_worker_threads_waiting 0.0" in text
    for turns in ("archive_exports", "bulk_imports"):
        assert f"context_store_{turns}_running 0.0" in text
        assert f"context_store_{turns}_waiting 0.0" in text
    assert re.search(r'context_store_db_pool_waiting\{pool="\w+"\} 0.0', text)
    waits = re.findall(r'context_store_db_pool_wait_seconds_count\{pool="\w+"\} ([0-9.]+)', text)
    assert sum(float(count) for count in waits) >= 1


def _connection_waiters(scraper: TestClient) -> float:
    text = scraper.get("/metrics").text
    found = re.search(r'context_store_db_pool_waiting\{pool="(?:reader|shared)"\} ([0-9.]+)', text)
    assert found is not None, text
    return float(found.group(1))


def test_metrics_count_the_threads_waiting_for_a_connection(database_url):
    settings = make_settings(database_url, worker_threads=1, db_pool_size=1)
    with TestClient(create_app(settings)) as scraper:
        # The deleter's look for deletes to finish, at start, done before the pool is taken whole.
        wait_for_the_deleter(scraper.app)
        engine = scraper.app.state.database.reader
        held = [engine.connect() for _ in range(settings.worker_threads + DB_POOL_MARGIN)]
        waiter = threading.Thread(target=lambda: engine.connect().close())
        waiter.start()
        try:
            deadline = time.monotonic() + 30
            while _connection_waiters(scraper) != 1:
                assert time.monotonic() < deadline, "the waiting thread was never counted"
                time.sleep(0.05)
        finally:
            for connection in held:
                connection.close()
            waiter.join()
        assert _connection_waiters(scraper) == 0
