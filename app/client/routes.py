"""Every route of the service, once: each method describes its request and how to read the
answer. ``ContextStoreClient`` and ``AsyncContextStoreClient`` both inherit these."""

# Annotations stay unevaluated: each ``Page[X]`` in a return type builds a pydantic model
# (about 5 ms), which a route's first call pays instead of every import.
from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Literal, TypedDict, TypeVar

import httpx

from app.agents.schemas import AppendReceipt, MemoryFile, RestoreResult, SnapshotReceipt
from app.archive.schemas import ArchiveMember, ArchiveReport
from app.client.calls import Call, Document, document, model, nothing, text
from app.client.endpoint import endpoint
from app.client.errors import EmptyName
from app.core.constraints import path_segment
from app.core.schemas import Page
from app.features.schemas import (
    BreakerChange,
    FeatureSummary,
    HandoverAppended,
    HandoverItem,
    WorkflowSummary,
)
from app.formats.agent_memory import NDJSON_MEDIA_TYPE
from app.formats.archive import MEDIA_TYPE as ARCHIVE_MEDIA_TYPE
from app.formats.feature_context import ReviewOutcome
from app.formats.gzip import is_gzip
from app.health.schemas import Health, Readiness
from app.keys.schemas import ApiKeyCreated, ApiKeyPublic
from app.memory.schemas import (
    ContextPack,
    FileReceipt,
    ItemCreated,
    MaintenanceResult,
    MemoryItemPublic,
    SummaryReceipt,
)
from app.projects.schemas import ProjectPublic
from app.runs.schemas import IterationResult, LoadResult, RunSummary, StateReceipt
from app.saves.schemas import PruneResult, ResumeResult, SaveReceipt, SaveSummary

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
MemoryItemKind = Literal["decisions", "failures", "constraints"]
MemoryFileName = Literal[
    "running-summary.json", "key-decisions.json", "failure-memory.json", "active-constraints.json"
]
Style = Literal["camel", "snake"]
T = TypeVar("T")


def _segment(name: str) -> str:
    """A name as one path segment: escaped, so that no name is another path or a query, and a
    name of dots is not a step up (the URL's dot segments would be resolved away). An empty
    name is refused: its empty segment would be another route's path."""
    if not name:
        raise EmptyName("A name in a route's path cannot be empty.")
    return path_segment(name)


# A route's path by its shape: each name in it escaped as one segment, then ``rest`` (``/saves``,
# ``/state:load``) as written. Every route builds its path with one of these, so that no route
# can put a name into its path unescaped.


def _project(project: str, rest: str = "") -> str:
    return f"/v1/projects/{_segment(project)}{rest}"


def _agent(project: str, agent: str, rest: str) -> str:
    return _project(project, f"/agents/{_segment(agent)}{rest}")


def _agent_memory(project: str, agent: str, memory: MemoryFile) -> str:
    return _agent(project, agent, f"/memory/{MemoryFile(memory).value}")


def _run(project: str, run: str, rest: str = "") -> str:
    return _project(project, f"/runs/{_segment(run)}{rest}")


def _feature(project: str, feature: str, rest: str) -> str:
    return _project(project, f"/features/{_segment(feature)}{rest}")


def _memory_item(project: str, kind: MemoryItemKind, item_id: str) -> str:
    return _project(project, f"/memory/{_segment(kind)}/{_segment(item_id)}")


def _headers(
    *,
    if_match: str | None = None,
    if_none_match: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, str | None]:
    """The optional request headers; one that is None is not sent."""
    return {
        "If-Match": if_match,
        "If-None-Match": if_none_match,
        "Idempotency-Key": idempotency_key,
    }


def _download(
    path: str, if_none_match: str | None, *, accept: str | None = None, style: Style | None = None
) -> Call[Document]:
    """A file's download; with ``if_none_match`` (an ETag of a copy the caller holds), a
    ``Document`` with ``modified=False`` and no content when that copy is still current."""
    headers = {"Accept": accept, **_headers(if_none_match=if_none_match)}
    return Call("GET", path, document, params={"style": style}, headers=headers)


class _Body(TypedDict):
    content: bytes
    headers: dict[str, str | None]


def _body(content: bytes, media_type: str = JSON, /, **headers: str | None) -> _Body:
    return {"content": content, "headers": {"Content-Type": media_type, **headers}}


def _replace(
    path: str,
    parse: Callable[[httpx.Response], T],
    content: bytes,
    if_match: str | None,
    if_none_match: str | None,
) -> Call[T]:
    """A file's PUT: its JSON bytes, on the conditions given."""
    headers = _headers(if_match=if_match, if_none_match=if_none_match)
    return Call("PUT", path, parse, **_body(content, **headers))


def _delete(path: str, if_match: str | None) -> Call[None]:
    return Call("DELETE", path, nothing, headers=_headers(if_match=if_match))


def _given(fields: dict[str, Any]) -> dict[str, Any]:
    """A JSON body of the fields given: one left out takes the route's default."""
    return {name: value for name, value in fields.items() if value is not None}


class Routes:
    # Operations.

    @endpoint
    def healthz(self) -> Call[Health]:
        return Call("GET", "/healthz", model(Health))

    @endpoint
    def readyz(self) -> Call[Readiness]:
        return Call("GET", "/readyz", model(Readiness))

    @endpoint
    def metrics(self) -> Call[str]:
        return Call("GET", "/metrics", text)

    # Projects.

    @endpoint
    def list_projects(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[Page[ProjectPublic]]:
        params = {"cursor": cursor, "limit": limit}
        return Call("GET", "/v1/projects", model(Page[ProjectPublic]), params=params)

    @endpoint
    def get_project(self, project: str) -> Call[ProjectPublic]:
        return Call("GET", _project(project), model(ProjectPublic))

    @endpoint
    def delete_project(self, project: str, *, if_match: str | None = None) -> Call[None]:
        return _delete(_project(project), if_match)

    # Saves.

    @endpoint
    def import_save(
        self,
        project: str,
        content: bytes,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[SaveReceipt]:
        """``content``: the save file, JSON or ``.json.gz``; ``filename`` its name
        (``mdan-save-<seconds>.json``), else the service names it after its timestamp."""
        media_type = "application/gzip" if is_gzip(content) else JSON
        return Call(
            "POST",
            _project(project, "/saves"),
            model(SaveReceipt),
            params={"filename": filename},
            **_body(content, media_type, **_headers(idempotency_key=idempotency_key)),
        )

    @endpoint
    def list_saves(
        self,
        project: str,
        *,
        phase: str | None = None,
        filename: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[Page[SaveSummary]]:
        params = {
            "phase": phase,
            "filename": filename,
            "since": since,
            "until": until,
            "cursor": cursor,
            "limit": limit,
        }
        path = _project(project, "/saves")
        return Call("GET", path, model(Page[SaveSummary]), params=params)

    @endpoint
    def latest_save(self, project: str, *, if_none_match: str | None = None) -> Call[Document]:
        return _download(_project(project, "/saves/latest"), if_none_match)

    @endpoint
    def export_save(
        self, project: str, save_id: int, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_project(project, f"/saves/{save_id}"), if_none_match)

    @endpoint
    def resume_save(
        self,
        project: str,
        save_id: int,
        *,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[ResumeResult]:
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _project(project, f"/saves/{save_id}/resume")
        return Call("POST", path, model(ResumeResult), headers=headers)

    @endpoint
    def delete_save(self, project: str, save_id: int, *, if_match: str | None = None) -> Call[None]:
        return _delete(_project(project, f"/saves/{save_id}"), if_match)

    @endpoint
    def prune_saves(self, project: str, keep_latest: int) -> Call[PruneResult]:
        path = _project(project, "/saves:prune")
        return Call("POST", path, model(PruneResult), json={"keep_latest": keep_latest})

    # Agents: working context snapshots, memory, restore.

    @endpoint
    def put_snapshot(
        self,
        project: str,
        agent: str,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[SnapshotReceipt]:
        path = _agent(project, agent, "/working-context-snapshot")
        return _replace(path, model(SnapshotReceipt), content, if_match, if_none_match)

    @endpoint
    def get_snapshot(
        self, project: str, agent: str, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_agent(project, agent, "/working-context-snapshot"), if_none_match)

    @endpoint
    def delete_snapshot(
        self, project: str, agent: str, *, if_match: str | None = None
    ) -> Call[None]:
        return _delete(_agent(project, agent, "/working-context-snapshot"), if_match)

    @endpoint
    def append_memory(
        self,
        project: str,
        agent: str,
        memory: MemoryFile,
        items: list[dict[str, Any]] | bytes,
        *,
        idempotency_key: str | None = None,
    ) -> Call[AppendReceipt]:
        """``items``: a list of items, or JSONL bytes (one item a line)."""
        path = _agent_memory(project, agent, memory)
        headers = _headers(idempotency_key=idempotency_key)
        if isinstance(items, bytes):
            body = _body(items, NDJSON_MEDIA_TYPE, **headers)
            return Call("POST", path, model(AppendReceipt), **body)
        return Call("POST", path, model(AppendReceipt), json=items, headers=headers)

    @endpoint
    def list_memory(
        self,
        project: str,
        agent: str,
        memory: MemoryFile,
        *,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[Page[dict[str, Any]]]:
        params = {"cursor": cursor, "limit": limit}
        path = _agent_memory(project, agent, memory)
        return Call("GET", path, model(Page[dict[str, Any]]), params=params)

    @endpoint
    def export_memory(
        self, project: str, agent: str, memory: MemoryFile, *, if_none_match: str | None = None
    ) -> Call[Document]:
        """The whole JSONL file, as autobyteus writes it."""
        path = _agent_memory(project, agent, memory)
        return _download(path, if_none_match, accept=NDJSON_MEDIA_TYPE)

    @endpoint
    def restore(
        self,
        project: str,
        agent: str,
        system_prompt: str,
        *,
        max_episodic: int = 3,
        max_semantic: int = 20,
        raw_tail_turns: int = 4,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[RestoreResult]:
        body = {
            "system_prompt": system_prompt,
            "max_episodic": max_episodic,
            "max_semantic": max_semantic,
            "raw_tail_turns": raw_tail_turns,
        }
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _agent(project, agent, "/restore")
        return Call("POST", path, model(RestoreResult), json=body, headers=headers)

    # Runs (atari).

    @endpoint
    def list_runs(
        self, project: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[Page[RunSummary]]:
        params = {"cursor": cursor, "limit": limit}
        return Call("GET", _project(project, "/runs"), model(Page[RunSummary]), params=params)

    @endpoint
    def put_state(
        self,
        project: str,
        run: str,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[StateReceipt]:
        path = _run(project, run, "/state")
        return _replace(path, model(StateReceipt), content, if_match, if_none_match)

    @endpoint
    def export_state(
        self, project: str, run: str, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_run(project, run, "/state"), if_none_match)

    @endpoint
    def export_backup(
        self, project: str, run: str, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_run(project, run, "/state/backup"), if_none_match)

    @endpoint
    def load_state(
        self, project: str, run: str, content: bytes, *, idempotency_key: str | None = None
    ) -> Call[LoadResult]:
        """atari's own load of a file from disk: any bytes."""
        path = _run(project, run, "/state:load")
        headers = _headers(idempotency_key=idempotency_key)
        body = _body(content, "application/octet-stream", **headers)
        return Call("POST", path, model(LoadResult), **body)

    @endpoint
    def start_iteration(
        self,
        project: str,
        run: str,
        bead_id: str,
        *,
        attempt: int | None = None,
        at: str | None = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[IterationResult]:
        body = _given({"bead_id": bead_id, "attempt": attempt, "at": at})
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _run(project, run, "/iterations")
        return Call("POST", path, model(IterationResult), json=body, headers=headers)

    @endpoint
    def end_iteration(
        self,
        project: str,
        run: str,
        bead_id: str,
        outcome: Literal["completed", "failed"],
        *,
        error: str | None = None,
        session_id: str | None = None,
        cost: float | None = None,
        turns: int | None = None,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[IterationResult]:
        body = {
            "bead_id": bead_id,
            "outcome": outcome,
            "error": error,
            "session_id": session_id,
            "cost": cost,
            "turns": turns,
        }
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _run(project, run, "/iterations/end")
        return Call("POST", path, model(IterationResult), json=_given(body), headers=headers)

    @endpoint
    def patch_state(
        self, project: str, run: str, changes: dict[str, Any], *, if_match: str | None = None
    ) -> Call[RunSummary]:
        """``changes``: the fields to set; None or "" clears an optional one."""
        headers = _headers(if_match=if_match)
        path = _run(project, run, "/state")
        return Call("PATCH", path, model(RunSummary), json=changes, headers=headers)

    @endpoint
    def delete_run(self, project: str, run: str, *, if_match: str | None = None) -> Call[None]:
        return _delete(_run(project, run), if_match)

    # Feature contexts and handovers (sdd-unified).

    @endpoint
    def create_feature(
        self, project: str, feature_id: str, *, idempotency_key: str | None = None
    ) -> Call[Document]:
        """A context from the template; returns the new ``context.json``."""
        return Call(
            "POST",
            _project(project, "/features"),
            document,
            json={"feature_id": feature_id},
            headers=_headers(idempotency_key=idempotency_key),
        )

    @endpoint
    def list_features(
        self,
        project: str,
        *,
        phase: str | None = None,
        intervention_required: bool | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[Page[FeatureSummary]]:
        params = {
            "phase": phase,
            "intervention_required": intervention_required,
            "cursor": cursor,
            "limit": limit,
        }
        path = _project(project, "/features")
        return Call("GET", path, model(Page[FeatureSummary]), params=params)

    @endpoint
    def export_context(
        self, project: str, feature: str, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_feature(project, feature, "/context"), if_none_match)

    @endpoint
    def put_context(
        self,
        project: str,
        feature: str,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[FeatureSummary]:
        path = _feature(project, feature, "/context")
        return _replace(path, model(FeatureSummary), content, if_match, if_none_match)

    @endpoint
    def patch_context(
        self, project: str, feature: str, patch: dict[str, Any], *, if_match: str | None = None
    ) -> Call[Document]:
        """A JSON merge patch (RFC 7396); returns the new ``context.json`` (its ETag alone,
        ``content`` empty, when it is over the server's body limit: ``export_context`` it)."""
        headers = {**_headers(if_match=if_match), "Content-Type": MERGE_PATCH}
        path = _feature(project, feature, "/context")
        return Call("PATCH", path, document, json=patch, headers=headers)

    @endpoint
    def delete_context(
        self, project: str, feature: str, *, if_match: str | None = None
    ) -> Call[None]:
        return _delete(_feature(project, feature, "/context"), if_match)

    @endpoint
    def export_workflow(
        self, project: str, feature: str, *, if_none_match: str | None = None
    ) -> Call[Document]:
        return _download(_feature(project, feature, "/workflow"), if_none_match)

    @endpoint
    def put_workflow(
        self,
        project: str,
        feature: str,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[WorkflowSummary]:
        path = _feature(project, feature, "/workflow")
        return _replace(path, model(WorkflowSummary), content, if_match, if_none_match)

    @endpoint
    def delete_workflow(
        self, project: str, feature: str, *, if_match: str | None = None
    ) -> Call[None]:
        return _delete(_feature(project, feature, "/workflow"), if_match)

    @endpoint
    def append_handover(
        self,
        project: str,
        feature: str,
        note: dict[str, Any],
        *,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[HandoverAppended]:
        """``note``: from_agent, to_agent, task_completed, message, and optionally
        timestamp, critical_points, artifacts_created."""
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _feature(project, feature, "/handovers")
        return Call("POST", path, model(HandoverAppended), json=note, headers=headers)

    @endpoint
    def list_handovers(
        self,
        project: str,
        *,
        to_agent: str | None = None,
        from_agent: str | None = None,
        feature_id: str | None = None,
        since: datetime | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[Page[HandoverItem]]:
        params = {
            "to_agent": to_agent,
            "from_agent": from_agent,
            "feature_id": feature_id,
            "since": since,
            "cursor": cursor,
            "limit": limit,
        }
        path = _project(project, "/handovers")
        return Call("GET", path, model(Page[HandoverItem]), params=params)

    @endpoint
    def record_review(
        self,
        project: str,
        feature: str,
        phase: str,
        outcome: ReviewOutcome,
        *,
        rejecting_agents: Iterable[str] = (),
        issues_count: int = 0,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[BreakerChange]:
        body = {
            "phase": phase,
            "outcome": outcome,
            "rejecting_agents": list(rejecting_agents),
            "issues_count": issues_count,
        }
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _feature(project, feature, "/reviews")
        return Call("POST", path, model(BreakerChange), json=body, headers=headers)

    @endpoint
    def reset_circuit_breaker(
        self,
        project: str,
        feature: str,
        *,
        if_match: str | None = None,
        idempotency_key: str | None = None,
    ) -> Call[BreakerChange]:
        headers = _headers(if_match=if_match, idempotency_key=idempotency_key)
        path = _feature(project, feature, "/circuit-breaker:reset")
        return Call("POST", path, model(BreakerChange), headers=headers)

    # Project memory (Context Agent).

    @endpoint
    def get_running_summary(
        self, project: str, *, style: Style | None = None, if_none_match: str | None = None
    ) -> Call[Document]:
        path = _project(project, "/memory/running-summary")
        return _download(path, if_none_match, style=style)

    @endpoint
    def put_running_summary(
        self,
        project: str,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[SummaryReceipt]:
        path = _project(project, "/memory/running-summary")
        return _replace(path, model(SummaryReceipt), content, if_match, if_none_match)

    @endpoint
    def export_memory_file(
        self,
        project: str,
        name: MemoryFileName,
        *,
        style: Style | None = None,
        if_none_match: str | None = None,
    ) -> Call[Document]:
        path = _project(project, f"/memory/files/{_segment(name)}")
        return _download(path, if_none_match, style=style)

    @endpoint
    def put_memory_file(
        self,
        project: str,
        name: MemoryFileName,
        content: bytes,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> Call[SummaryReceipt | FileReceipt]:
        path = _project(project, f"/memory/files/{_segment(name)}")
        receipt = SummaryReceipt if name == "running-summary.json" else FileReceipt
        return _replace(path, model(receipt), content, if_match, if_none_match)

    @endpoint
    def list_memory_items(
        self,
        project: str,
        kind: MemoryItemKind,
        *,
        feature_id: str | None = None,
        category: str | None = None,
        severity: str | None = None,
        type: str | None = None,
        since: int | None = None,
        until: int | None = None,
        q: str | None = None,
        include_archived: bool | None = None,
        include_expired: bool | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[Page[MemoryItemPublic]]:
        """Filters as the route of ``kind`` takes them: ``category`` (decisions),
        ``severity`` (failures), ``type`` and ``include_expired`` (constraints)."""
        params = {
            "feature_id": feature_id,
            "category": category,
            "severity": severity,
            "type": type,
            "since": since,
            "until": until,
            "q": q,
            "include_archived": include_archived,
            "include_expired": include_expired,
            "cursor": cursor,
            "limit": limit,
        }
        path = _project(project, f"/memory/{_segment(kind)}")
        return Call("GET", path, model(Page[MemoryItemPublic]), params=params)

    @endpoint
    def create_memory_item(
        self,
        project: str,
        kind: MemoryItemKind,
        item: dict[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> Call[ItemCreated]:
        path = _project(project, f"/memory/{_segment(kind)}")
        headers = _headers(idempotency_key=idempotency_key)
        return Call("POST", path, model(ItemCreated), json=item, headers=headers)

    @endpoint
    def get_memory_item(
        self, project: str, kind: MemoryItemKind, item_id: str
    ) -> Call[MemoryItemPublic]:
        return Call("GET", _memory_item(project, kind, item_id), model(MemoryItemPublic))

    @endpoint
    def patch_memory_item(
        self,
        project: str,
        kind: MemoryItemKind,
        item_id: str,
        patch: dict[str, Any],
        *,
        if_match: str | None = None,
    ) -> Call[MemoryItemPublic]:
        headers = {**_headers(if_match=if_match), "Content-Type": MERGE_PATCH}
        path = _memory_item(project, kind, item_id)
        return Call("PATCH", path, model(MemoryItemPublic), json=patch, headers=headers)

    @endpoint
    def delete_memory_item(
        self, project: str, kind: MemoryItemKind, item_id: str, *, if_match: str | None = None
    ) -> Call[None]:
        return _delete(_memory_item(project, kind, item_id), if_match)

    @endpoint
    def memory_maintenance(self, project: str) -> Call[MaintenanceResult]:
        path = _project(project, "/memory/maintenance")
        return Call("POST", path, model(MaintenanceResult))

    @endpoint
    def context_pack(
        self,
        project: str,
        *,
        feature_id: str | None = None,
        about: str | None = None,
        max_tokens: int | None = None,
    ) -> Call[ContextPack]:
        params = {"feature_id": feature_id, "about": about, "max_tokens": max_tokens}
        path = _project(project, "/memory/context")
        return Call("GET", path, model(ContextPack), params=params)

    # Project archive.

    @endpoint
    def export_archive(self, project: str) -> Call[Document]:
        """The whole project as a .tar.gz (``content``); see also ``download_archive``."""
        return Call("GET", _project(project, "/archive"), document)

    @endpoint
    def list_archive_members(
        self, project: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[Page[ArchiveMember]]:
        """The paths the archive would hold, without building it."""
        params = {"cursor": cursor, "limit": limit}
        path = _project(project, "/archive/members")
        return Call("GET", path, model(Page[ArchiveMember]), params=params)

    @endpoint
    def import_archive(
        self,
        project: str,
        content: bytes | Iterable[bytes],
        *,
        idempotency_key: str | None = None,
    ) -> Call[ArchiveReport]:
        """``content``: a .tar.gz, as bytes or as chunks (to report progress)."""
        headers = {"Content-Type": ARCHIVE_MEDIA_TYPE, **_headers(idempotency_key=idempotency_key)}
        path = _project(project, "/archive")
        return Call("POST", path, model(ArchiveReport), content=content, headers=headers)

    # API keys (admin scope; the caller's own tenant).

    @endpoint
    def create_key(self, scopes: Iterable[str], *, name: str | None = None) -> Call[ApiKeyCreated]:
        body = {"scopes": list(scopes), "name": name}
        return Call("POST", "/v1/admin/keys", model(ApiKeyCreated), json=body)

    @endpoint
    def list_keys(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[Page[ApiKeyPublic]]:
        params = {"cursor": cursor, "limit": limit}
        return Call("GET", "/v1/admin/keys", model(Page[ApiKeyPublic]), params=params)

    @endpoint
    def get_key(self, key_id: str) -> Call[ApiKeyPublic]:
        return Call("GET", f"/v1/admin/keys/{_segment(key_id)}", model(ApiKeyPublic))

    @endpoint
    def revoke_key(self, key_id: str, *, if_match: str | None = None) -> Call[None]:
        return _delete(f"/v1/admin/keys/{_segment(key_id)}", if_match)
