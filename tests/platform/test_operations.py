"""Health, readiness, metrics, offline Swagger UI, and the committed OpenAPI document."""

import re

from fastapi.testclient import TestClient

from app import openapi
from app.main import create_app
from tests.conftest import make_settings


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
