"""Every router of the app is skipped by one expression when no route of it could match
(``app/core/routing.py``): a router without a gate is tried route by route on every request."""

import re

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
