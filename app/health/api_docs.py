"""The operations routes as /docs shows them: summaries and examples (see
app/core/api_docs.py)."""

from app.core.api_docs import DomainDocs, Operation, Reply, Tag
from app.core.migrations import head_revision

DOCS = DomainDocs(
    Tag(
        "operations",
        "For the people and machines that run the service: liveness, readiness, metrics.",
    ),
    {
        "GET /healthz": Operation("Is the process up?", {200: Reply("Up.", {"status": "ok"})}),
        "GET /readyz": Operation(
            "Is the service ready to serve?",
            {
                200: Reply(
                    "The database answers and is migrated to this release's head.",
                    {"status": "ok", "database": "sqlite", "migration": head_revision()},
                )
            },
        ),
        "GET /metrics": Operation(
            "Prometheus metrics",
            {
                200: Reply(
                    "The text exposition format.",
                    "# HELP http_requests_total Requests served.\n"
                    "# TYPE http_requests_total counter\n"
                    'http_requests_total{method="GET",route="/healthz",status="200"} 12.0\n',
                    media_type="text/plain",
                )
            },
        ),
    },
)
