"""The app factory: settings, database, routers, error handlers, middleware."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import (
    __version__,
    models,  # every table registered before anything queries
)
from app.agents.router import router as agents_router
from app.archive.router import router as archive_router
from app.core.api_docs import document_api
from app.core.auth_off import IgnoredKeyWarningMiddleware
from app.core.config import AuthMode, Settings
from app.core.db import create_database
from app.core.deps import KeyLookup, PrincipalCache
from app.core.docs import install_docs
from app.core.errors import install_error_handlers
from app.core.fair import use_fair_threads
from app.core.json import FastJSONResponse
from app.core.limits import BodyBytes, Turns
from app.core.logs import RequestRecordMiddleware
from app.core.metrics import Metrics
from app.core.migrations import head_revision
from app.core.rebinding import RebindingGuardMiddleware
from app.core.sending import SendingMiddleware
from app.docs_catalog import DOMAINS, PATH_EXAMPLES
from app.features.router import router as features_router
from app.health.router import router as health_router
from app.keys import repository as keys_repository
from app.keys.router import router as keys_router
from app.keys.service import principal_for
from app.mcp_server.http import install_mcp
from app.memory.router import router as memory_router
from app.projects import resources as project_resources
from app.projects import service as project_service
from app.projects.router import router as projects_router
from app.runs.router import router as runs_router
from app.saves.router import router as saves_router

DESCRIPTION = """\
Stores what coding agents need to survive token limits, crashes and restarts (context saves,
working-context snapshots, run state, feature contexts, project memory) and gives every file
back exactly as its tool wrote it.

Authenticate with `Authorization: Bearer <key>` or `X-API-Key: <key>`. Errors are
`application/problem+json` (RFC 9457).
"""


log = logging.getLogger(__name__)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    # The limiter every sync route, sync dependency, run_in_threadpool and PostgreSQL write
    # turn shares, its tenants in turn; the pools are sized from the same setting
    # (app/core/db.py).
    app.state.worker_threads = use_fair_threads(settings.worker_threads)
    database = create_database(settings)
    app.state.database = database
    app.state.metrics.observe_database(database)
    # Made (or read from its file, beside the database) at start, not by a request.
    settings.fingerprint_secret  # noqa: B018
    if settings.fingerprint_key is None and settings.fingerprint_key_file is None:
        log.warning(
            "CONTEXT_STORE_FINGERPRINT_KEY is not set: this process drew its own key, so an "
            "Idempotency-Key retry sent after a restart or to another replica is refused as "
            "a different request, and a list's cursor handed out before a restart or by "
            "another replica is refused (422: the client starts the list again)"
        )
    # The one deleter of the hidden projects' rows (app/projects/service.py), woken now for
    # the deletes an earlier process began and did not end, and by each delete after.
    deleter = project_service.ProjectDeleter(database)
    app.state.project_deleter = deleter
    deleter.start()
    try:
        yield
    finally:
        await deleter.stop()
        database.dispose()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    app = FastAPI(
        title="context-store",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        default_response_class=FastJSONResponse,
        docs_url=None,
        redoc_url=None,
        # A path with a slash too many is a 404 like any other: Starlette's redirect to the
        # path without it was built from the request's Host and kept its query, so it sent a
        # client (a key in its query with it) wherever a forged Host named, with no key asked.
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.state.principal_cache = PrincipalCache(settings.auth_cache_seconds)
    app.state.key_lookup = KeyLookup(
        find_principal=principal_for, key_is_active=keys_repository.is_active
    )
    project_resources.hold(models.PROJECT_RESOURCES)
    app.state.migration_head = head_revision()
    # Archives, agent memory files sent whole, and documents over the body limit: their
    # settings keep the archives' names.
    app.state.archive_exports = Turns(
        "exports of whole files (archives, agent memory files, files over the body limit)",
        per_tenant=settings.archive_exports_per_tenant,
        per_server=settings.archive_exports_per_server,
        wait_seconds=settings.archive_export_wait_seconds,
    )
    app.state.body_bytes = BodyBytes(
        per_tenant=settings.body_bytes_per_tenant, per_server=settings.body_bytes_per_server
    )
    app.state.bulk_imports = Turns(
        "imports under the bulk limit",
        per_tenant=settings.bulk_imports_per_tenant,
        per_server=settings.bulk_imports_per_server,
        wait_seconds=settings.bulk_import_wait_seconds,
    )
    metrics = Metrics(
        # None before the lifespan has created them.
        database=lambda: getattr(app.state, "database", None),
        threads=lambda: getattr(app.state, "worker_threads", None),
        turns={
            "archive_exports": app.state.archive_exports,
            "bulk_imports": app.state.bulk_imports,
        },
    )
    app.state.metrics = metrics

    install_error_handlers(app)
    for router in (
        health_router,
        projects_router,
        saves_router,
        agents_router,
        runs_router,
        features_router,
        memory_router,
        archive_router,
        keys_router,
    ):
        app.include_router(router)
    install_mcp(app, settings)
    install_docs(app)
    document_api(app, DOMAINS, PATH_EXAMPLES)

    if settings.auth is AuthMode.off:
        app.add_middleware(IgnoredKeyWarningMiddleware)
    # Redaction, content coding and gzip, and the send timeout, in one pass (app/core/sending.py).
    app.add_middleware(
        SendingMiddleware,
        timeout=settings.send_timeout_seconds,
        redact=settings.redact,
        gzip_minimum_bytes=settings.gzip_minimum_bytes,
        gzip_level=settings.gzip_level,
    )
    allowed_callers = settings.allowed_callers
    if settings.auth is AuthMode.off and allowed_callers is not None:
        # No key guards the store: a page that rebinds its name to this address is refused
        # before anything reads its request (logged and counted by the layer outside).
        app.add_middleware(RebindingGuardMiddleware, allowed=allowed_callers)
    # Outermost: the request id is set before anything else runs, and every request is logged
    # and counted.
    app.add_middleware(RequestRecordMiddleware, metrics=metrics)
    return app
