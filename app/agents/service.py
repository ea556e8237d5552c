"""The rules for agents: the snapshot cache, memory appends, and restore (cache first,
otherwise a rebuild from memory, as autobyteus 1.4's bootstrapper does)."""

import json
from dataclasses import dataclass
from typing import Any, Literal

from sqlmodel import Session

from app.agents import compaction
from app.agents.models import AgentMemoryItem, AgentSnapshot
from app.agents.repository import AgentMemoryRepository, SnapshotRepository
from app.agents.schemas import RestoreRequest, SnapshotReceipt
from app.core import redaction
from app.core.conditional import Precondition
from app.core.db import utcnow
from app.core.documents import ANY_SIZE, Download, check_size, set_content
from app.core.errors import NotFound
from app.formats import agent_memory, jsondoc
from app.formats import working_context_snapshot as snapshot_format
from app.formats.agent_memory import FILENAMES, MemoryKind
from app.formats.errors import MalformedDocument, TooManyFaults
from app.projects.repository import ProjectRepository
from app.projects.service import project_id
from app.storage.writes import Write


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
    write: Write, snapshot: AgentSnapshot | None, agent: str, prepared: PreparedSnapshot
) -> AgentSnapshot:
    """The agent's cache (its locked row; a new one when none is stored) now holds
    ``prepared``."""
    if snapshot is None:
        # Its document's columns: set_content, below.
        snapshot = AgentSnapshot(project_id=write.project_id, agent=agent)  # type: ignore[call-arg]
    set_content(snapshot, prepared.content)
    return SnapshotRepository(write.sessions).add(snapshot)


def store_snapshot(
    write: Write, agent: str, prepared: PreparedSnapshot, precondition: Precondition
) -> StoredSnapshot:
    current = write.locked(SnapshotRepository(write.sessions), agent, precondition=precondition)
    snapshot = _store(write, current, agent, prepared)
    document = prepared.document
    receipt = SnapshotReceipt(
        agent_id=agent,
        schema_version=document["schema_version"],
        epoch_id=document["epoch_id"],
        message_count=len(document["messages"]),
        size_bytes=len(snapshot.content),
    )
    return StoredSnapshot(created=current is None, etag=snapshot.etag, receipt=receipt)


def get_snapshot(
    session: Session, tenant: str, project: str, agent: str, up_to: int = ANY_SIZE
) -> Download:
    """The cache; ``Oversized``, and none of it read, when over ``up_to`` bytes."""
    pid = project_id(session, tenant, project)
    found = SnapshotRepository(session).get_within(pid, agent, document="content", up_to=up_to)
    if found is None:
        raise _not_found(agent)
    snapshot, size = found
    check_size(snapshot.etag, size, up_to)
    return Download(filename=snapshot_format.FILENAME, etag=snapshot.etag, content=snapshot.content)


def delete_snapshot(write: Write, agent: str, precondition: Precondition) -> None:
    repository = SnapshotRepository(write.sessions)
    snapshot = write.existing(
        repository, agent, missing=_not_found(agent), precondition=precondition
    )
    repository.delete(snapshot)


def _memory_in(write: Write, agent: str, kind: MemoryKind) -> AgentMemoryRepository:
    return AgentMemoryRepository(write.session, write.project_id, agent, kind)


def prepare_memory(raw: bytes, media_type: str | None, kind: MemoryKind) -> list[dict[str, Any]]:
    """The items checked and redacted: everything that needs no database."""
    items: list[dict[str, Any]] = redaction.for_storage(agent_memory.parse(raw, media_type, kind))
    return items


def store_memory(write: Write, agent: str, kind: MemoryKind, items: list[dict[str, Any]]) -> int:
    """Append items ``prepare_memory`` gave; how many."""
    _memory_in(write, agent, kind).add(
        [(agent_memory.render_line(item), item.get("turn_id")) for item in items]
    )
    return len(items)


def prune_raw_traces(write: Write, agent: str, turn_ids: set[str]) -> int:
    """Take every raw trace of these turns out, as autobyteus's ``prune_raw_traces`` does
    after a compaction (it moves them to raw_traces_archive.jsonl, a file of its own here
    too). How many traces went."""
    repository = _memory_in(write, agent, MemoryKind.raw_trace)
    pruned = [row for row in repository.all() if json.loads(row.line)["turn_id"] in turn_ids]
    repository.remove(pruned)
    return len(pruned)


def _memory(
    session: Session, tenant: str, project: str, agent: str, kind: MemoryKind
) -> AgentMemoryRepository:
    return AgentMemoryRepository(session, project_id(session, tenant, project), agent, kind)


def memory_page(
    session: Session,
    tenant: str,
    project: str,
    agent: str,
    kind: MemoryKind,
    cursor: str | None,
    limit: int,
    most_bytes: int,
) -> tuple[list[bytes], str | None]:
    memory = _memory(session, tenant, project, agent, kind)
    items, next_cursor = memory.page(cursor, limit, most_bytes)
    return [item.line for item in items], next_cursor


def memory_lines(write: Write, agent: str, kind: MemoryKind) -> list[bytes]:
    """The lines stored, in append order, as the write sees them."""
    return _memory_in(write, agent, kind).lines()


def memory_file(
    session: Session, tenant: str, project: str, agent: str, kind: MemoryKind
) -> Download:
    lines = _memory(session, tenant, project, agent, kind).lines()
    return Download.of(FILENAMES[kind], agent_memory.render_file(lines))


def _cached(snapshot: AgentSnapshot | None, agent: str) -> tuple[Any, str | None]:
    """What the cache holds, and why it cannot be used (None when it can)."""
    if snapshot is None:
        return None, "no snapshot is cached"
    try:
        document = jsondoc.load(snapshot.content)
    except MalformedDocument:
        return None, "the cached snapshot is not well-formed JSON"
    try:
        faults = snapshot_format.faults(document, agent)
    except TooManyFaults as many:
        faults = [*many.errors, ("", "and more")]
    if faults:
        listed = "; ".join(f"{path or '/'}: {message}" for path, message in faults)
        return document, f"the cached snapshot is invalid ({listed})"
    return document, None


def _items(rows: list[AgentMemoryItem]) -> list[dict[str, Any]]:
    return [json.loads(row.line) for row in rows]


def _rebuilt_messages(
    session: Session, project: int | None, agent: str, options: RestoreRequest
) -> list[dict[str, Any]]:
    """From the system prompt and ``agent``'s memory; ``project`` None: none yet (a restore,
    like any write, creates it), and no memory."""
    if project is None:
        return compaction.build_messages(options.system_prompt, [], [], [])

    def memory(kind: MemoryKind) -> AgentMemoryRepository:
        return AgentMemoryRepository(session, project, agent, kind)

    traces = _items(memory(MemoryKind.raw_trace).of_last_turns(options.raw_tail_turns))
    return compaction.build_messages(
        options.system_prompt,
        _items(memory(MemoryKind.episodic).latest(options.max_episodic)),
        _items(memory(MemoryKind.semantic).latest(options.max_semantic)),
        compaction.select_raw_tail(traces, options.raw_tail_turns),
    )


@dataclass(frozen=True)
class PlannedRestore:
    """A restore read and built before its write: the cache's ETag as it was read (None: no
    cache), and the snapshot to store."""

    read_etag: str | None
    source: Literal["cache", "rebuild"]
    reason: str
    prepared: PreparedSnapshot


def plan_restore(
    session: Session, tenant: str, project: str, agent: str, options: RestoreRequest
) -> PlannedRestore:
    """Cache first; otherwise rebuild from memory: read, built, redacted and rendered with no
    lock held. Made in its write, a rebuild of 4,000 items of 40 KB took 8-12 s, and on
    SQLite every tenant's writes waited for it (2026-11-27)."""
    found = ProjectRepository(session).id_of(tenant, project)
    current = None if found is None else SnapshotRepository(session).get(found, agent)
    cached, problem = _cached(current, agent)
    if problem is None:
        messages = [snapshot_format.message_through_message(m) for m in cached["messages"]]
    else:
        messages = _rebuilt_messages(session, found, agent, options)
    document = snapshot_format.snapshot(
        agent, snapshot_format.RESTORED_EPOCH, utcnow().timestamp(), messages
    )
    return PlannedRestore(
        read_etag=None if current is None else current.etag,
        source="cache" if problem is None else "rebuild",
        reason="the cached snapshot is valid" if problem is None else problem,
        prepared=_prepared(document),
    )


def restore(
    write: Write, agent: str, planned: PlannedRestore, precondition: Precondition
) -> Restored | None:
    """The planned restore stored as the new cache, as autobyteus 1.4.4 persists it after
    ``restore_agent``: at epoch 2, compacted now, and the cached messages written again
    through its ``Message``. None, with nothing stored, when the cache is no longer the one the
    plan read (a write between the two): the caller plans again."""
    current = write.locked(SnapshotRepository(write.sessions), agent, precondition=precondition)
    if (None if current is None else current.etag) != planned.read_etag:
        return None
    snapshot = _store(write, current, agent, planned.prepared)
    return Restored(
        source=planned.source,
        reason=planned.reason,
        etag=snapshot.etag,
        document=planned.prepared.document,
    )
