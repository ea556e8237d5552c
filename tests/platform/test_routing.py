"""Every router of the app is skipped by one expression when no route of it could match
(``app/core/routing.py``): a router without a gate is tried route by route on every request."""

import re

import pytest

from app.core.routing import GatedRouter
from app.main import create_app
from tests.conftest import make_settings


def test_every_router_of_the_app_has_a_gate(database_url):
    app = create_app(make_settings(database_url))
    included = [route for route in app.router.routes if hasattr(route, "original_router")]
    assert len(included) >= 9
    for route in included:
        router = route.original_router
        assert isinstance(router, GatedRouter), router
        # A router holding a router (or a mount) would have no gate: every route of it is
        # tried, and its own routes' paths lack the prefix it is included under.
        assert router.gate is not None, router.prefix
        for member in router.routes:
            assert router.gate.match(re.sub(r"{[^}]*}", "1", member.path_format))


@pytest.mark.parametrize(
    "path",
    ["/v1/projects/", "/healthz/", "/metrics/", "/mcp/", "/docs/", "/v1/admin/keys/"],
)
def test_a_path_with_a_slash_too_many_is_a_404_not_a_redirect(client, path):
    """Starlette's redirect to the path without its slash was built from the request's Host
    and kept its query string: any Host a client forged, a secret in the query with it, and
    no key asked."""
    secret = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    response = client.get(
        path,
        params={"token": secret},
        headers={"Host": "evil.example"},
        follow_redirects=False,
    )
    assert response.status_code == 404, (response.status_code, response.headers)
    assert "location" not in response.headers
    assert response.headers["content-type"].startswith("application/problem+json")
    assert secret not in response.text and "evil.example" not in response.text
