"""The rules for agents: the snapshot cache, memory appends, and restore (cache first,
otherwise a rebuild from memory, as autobyteus 1.4's bootstrapper does)."""

import json
from dataclasses import dataclass
from typing import Any, Literal

from sqlmodel import Session

from app.agents import compaction
from app.agents.models import AgentMemoryItem, AgentSnapshot
from app.agents.repository import MemoryRepository, SnapshotRepository
from app.agents.schemas import RestoreRequest, SnapshotReceipt
from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import utcnow
from app.core.errors import NotFound
from app.formats import agent_memory, jsondoc
from app.formats import working_context_snapshot as snapshot_format
from app.formats.agent_memory import MemoryKind
from app.formats.errors import MalformedDocument
from app.projects.service import project_id, touch_project


@dataclass(frozen=True)
class Download:
    etag: str
    content: bytes


@dataclass(frozen=True)
class StoredSnapshot:
    created: bool
    etag: str
    receipt: SnapshotReceipt


@dataclass(frozen=True)
class Restored:
    source: Literal["cache", "rebuild"]
    reason: str
    etag: str
    document: dict[str, Any]


def _not_found(agent: str) -> NotFound:
    return NotFound(f"Agent {agent!r} has no working context snapshot in this project.")


@dataclass(frozen=True)
class PreparedSnapshot:
    """A snapshot checked, redacted and rendered: everything that needs no database."""

    document: dict[str, Any]
    content: bytes


def prepare_snapshot(raw: bytes, agent: str) -> PreparedSnapshot:
    return _prepared(snapshot_format.parse(raw, agent))


def _prepared(document: dict[str, Any]) -> PreparedSnapshot:
    document = redaction.for_storage(document)
    return PreparedSnapshot(document, snapshot_format.render(document))


def _store(
    repository: SnapshotRepository, snapshot: AgentSnapshot, prepared: PreparedSnapshot
) -> None:
    snapshot.content = prepared.content
    snapshot.etag = etag_of(snapshot.content)
    snapshot.updated_at = utcnow()
    repository.save(snapshot)


def _locked(
    session: Session, tenant: str, project: str, agent: str, precondition: Precondition
) -> tuple[SnapshotRepository, AgentSnapshot]:
    """The agent's snapshot row, locked for this transaction (a new one when none is stored),
    after the client's precondition has seen its ETag."""
    pid = touch_project(session, tenant, project)
    repository = SnapshotRepository(session)
    current = repository.get(pid, agent, for_update=True)
    precondition(current.etag if current is not None else None)
    # A new row's document columns are set by the caller, before the flush.
    return repository, current or AgentSnapshot(project_id=pid, agent=agent)  # type: ignore[call-arg]


def put_snapshot(
    session: Session, tenant: str, project: str, agent: str, raw: bytes, precondition: Precondition
) -> StoredSnapshot:
    return store_snapshot(
        session, tenant, project, agent, prepare_snapshot(raw, agent), precondition
    )


def store_snapshot(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    prepared: PreparedSnapshot,
    precondition: Precondition,
) -> StoredSnapshot:
    repository, snapshot = _locked(session, tenant, project, agent, precondition)
    created = snapshot.id is None
    _store(repository, snapshot, prepared)
    document = prepared.document
    receipt = SnapshotReceipt(
        agent_id=agent,
        schema_version=document["schema_version"],
        epoch_id=document["epoch_id"],
        message_count=len(document["messages"]),
        size_bytes=len(snapshot.content),
    )
    return StoredSnapshot(created=created, etag=snapshot.etag, receipt=receipt)


def get_snapshot(session: Session, tenant: str, project: str, agent: str) -> Download:
    snapshot = SnapshotRepository(session).get(project_id(session, tenant, project), agent)
    if snapshot is None:
        raise _not_found(agent)
    return Download(etag=snapshot.etag, content=snapshot.content)


def delete_snapshot(
    session: Session, tenant: str, project: str, agent: str, precondition: Precondition
) -> None:
    repository = SnapshotRepository(session)
    # The project's row first, as on every write (see touch_project); a 404 rolls it back.
    snapshot = repository.get(touch_project(session, tenant, project), agent, for_update=True)
    if snapshot is None:
        raise _not_found(agent)
    precondition(snapshot.etag)
    repository.delete(snapshot)


def append_memory(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    kind: MemoryKind,
    raw: bytes,
    media_type: str | None,
) -> int:
    return store_memory(
        session, tenant, project, agent, kind, prepare_memory(raw, media_type, kind)
    )


def prepare_memory(raw: bytes, media_type: str | None, kind: MemoryKind) -> list[dict[str, Any]]:
    """The items checked and redacted: everything that needs no database."""
    items: list[dict[str, Any]] = redaction.for_storage(agent_memory.parse(raw, media_type, kind))
    return items


def store_memory(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    kind: MemoryKind,
    items: list[dict[str, Any]],
) -> int:
    """Append items ``prepare_memory`` gave."""
    repository = MemoryRepository(session, touch_project(session, tenant, project), agent, kind)
    repository.add([(agent_memory.render_line(item), item.get("turn_id")) for item in items])
    return len(items)


def prune_raw_traces(
    session: Session, tenant: str, project: str, agent: str, turn_ids: set[str]
) -> int:
    """Take every raw trace of these turns out, as autobyteus's ``prune_raw_traces`` does
    after a compaction (it moves them to raw_traces_archive.jsonl, a file of its own here
    too). How many traces went."""
    repository = MemoryRepository(
        session, touch_project(session, tenant, project), agent, MemoryKind.raw_trace
    )
    pruned = [row for row in repository.all() if json.loads(row.line)["turn_id"] in turn_ids]
    repository.remove(pruned)
    return len(pruned)


def _memory(
    session: Session, tenant: str, project: str, agent: str, kind: MemoryKind
) -> MemoryRepository:
    return MemoryRepository(session, project_id(session, tenant, project), agent, kind)


def memory_page(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    kind: MemoryKind,
    cursor: str | None,
    limit: int,
) -> tuple[list[bytes], str | None]:
    items, next_cursor = _memory(session, tenant, project, agent, kind).page(cursor, limit)
    return [item.line for item in items], next_cursor


def memory_file(
    session: Session, tenant: str, project: str, agent: str, kind: MemoryKind
) -> Download:
    lines = [item.line for item in _memory(session, tenant, project, agent, kind).all()]
    content = agent_memory.render_file(lines)
    return Download(etag=etag_of(content), content=content)


def _cached(snapshot: AgentSnapshot | None, agent: str) -> tuple[Any, str | None]:
    """What the cache holds, and why it cannot be used (None when it can)."""
    if snapshot is None:
        return None, "no snapshot is cached"
    try:
        document = jsondoc.load(snapshot.content)
    except MalformedDocument:
        return None, "the cached snapshot is not well-formed JSON"
    faults = snapshot_format.faults(document, agent)
    if faults:
        listed = "; ".join(f"{path or '/'}: {message}" for path, message in faults)
        return document, f"the cached snapshot is invalid ({listed})"
    return document, None


def _items(rows: list[AgentMemoryItem]) -> list[dict[str, Any]]:
    return [json.loads(row.line) for row in rows]


def _rebuilt_messages(
    session: Session, project_id: int, agent: str, options: RestoreRequest
) -> list[dict[str, Any]]:
    def memory(kind: MemoryKind) -> MemoryRepository:
        return MemoryRepository(session, project_id, agent, kind)

    traces = _items(memory(MemoryKind.raw_trace).of_last_turns(options.raw_tail_turns))
    return compaction.build_messages(
        options.system_prompt,
        _items(memory(MemoryKind.episodic).latest(options.max_episodic)),
        _items(memory(MemoryKind.semantic).latest(options.max_semantic)),
        compaction.select_raw_tail(traces, options.raw_tail_turns),
    )


def restore(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    options: RestoreRequest,
    precondition: Precondition,
) -> Restored:
    """Cache first; otherwise rebuild from memory. Either way the result becomes the cache,
    as autobyteus 1.4.4 persists it after ``restore_agent``: at epoch 2, compacted now, and
    the cached messages written again through its ``Message``."""
    repository, snapshot = _locked(session, tenant, project, agent, precondition)
    cached, problem = _cached(snapshot if snapshot.id is not None else None, agent)
    if problem is None:
        messages = [snapshot_format.message_through_message(m) for m in cached["messages"]]
    else:
        messages = _rebuilt_messages(session, snapshot.project_id, agent, options)
    document = snapshot_format.snapshot(
        agent, snapshot_format.RESTORED_EPOCH, utcnow().timestamp(), messages
    )
    _store(repository, snapshot, _prepared(document))
    return Restored(
        source="cache" if problem is None else "rebuild",
        reason="the cached snapshot is valid" if problem is None else problem,
        etag=snapshot.etag,
        document=document,
    )
