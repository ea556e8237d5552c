"""The rules of project memory: files in either key style, items, expiry, maintenance, packs."""

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.constraints import MAX_LIST_ITEMS
from app.core.db import utcnow
from app.core.documents import (
    ANY_SIZE,
    Download,
    Oversized,
    check_size,
    document_columns,
    set_content,
)
from app.core.errors import Conflict, FieldError, InvalidContent, NotFound
from app.formats import jsondoc
from app.formats import project_memory as codec
from app.formats.errors import InvalidDocument
from app.formats.project_memory import ItemKind, Style
from app.memory import pack as packing
from app.memory import tokens
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.memory.repository import (
    FileStyleRepository,
    ItemFilter,
    ItemRepository,
    RankableRow,
    SummaryRepository,
)
from app.memory.schemas import (
    ContextPack,
    MaintenanceResult,
    MemoryItemPublic,
    SummaryReceipt,
    SummaryWarning,
)
from app.projects.service import project_id
from app.storage.writes import Write

SUMMARY_FILE = "running-summary.json"
ITEM_FILES = {
    ItemKind.decision: "key-decisions.json",
    ItemKind.failure: "failure-memory.json",
    ItemKind.constraint: "active-constraints.json",
}
ID_PREFIX = {ItemKind.decision: "dec", ItemKind.failure: "fail", ItemKind.constraint: "con"}
ID_PATTERN = {
    kind: re.compile(re.escape(prefix) + r"-(\d+)$") for kind, prefix in ID_PREFIX.items()
}
# An id's number as indexed (``MemoryItem.id_number``): what a BIGINT column holds.
ID_NUMBER_CAP = jsondoc.INT64_MAX
# Seed 004, "Maintenance": decisions archived after 50 features, resolved failures after 100.
DECISIONS_KEPT_FOR_FEATURES = 50
RESOLVED_FAILURES_KEPT_FOR_FEATURES = 100
# The pack ranks at most this many of a feature's own failures and of the project's newest.
FAILURE_CANDIDATES = 500
# Search covers this much of an item's text: PostgreSQL refuses a tsvector over 1 MB.
MAX_SEARCH_CHARS = 100_000


def now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


# The running summary.


class OverLimit(StrEnum):
    """What a summary over the token limit gets: the service's own write route refuses it; a
    file imported (the file route, an archive, a push) is what its writer wrote, and is kept
    with a warning. The Context Agent caps its summary by its own ``len(text) // 4`` estimate,
    which lets through text that cl100k_base counts far higher (8,000 CJK characters: 2000 by
    the estimate, some 7,000 tokens)."""

    refuse = "refuse"
    warn = "warn"


def _summary_over_limit(counted: int, limit: int, over_limit: OverLimit) -> list[SummaryWarning]:
    if counted <= limit:
        return []
    message = f"{counted} tokens, over the limit of {limit}"
    if over_limit is OverLimit.refuse:
        raise InvalidContent(
            f"The summary's content is {counted} tokens (cl100k_base); the limit is {limit}.",
            errors=[FieldError("/content", message)],
        )
    return [
        SummaryWarning(
            pointer="/content",
            message=f"{message} (cl100k_base); kept as written, and cut to fit in context packs",
        )
    ]


def summary_file(
    session: Session, tenant: str, project: str, style: Style | None, up_to: int = ANY_SIZE
) -> Download:
    """The running summary (in ``style``: as stored, if None); ``Oversized``, and none of it
    read, when stored over ``up_to`` bytes."""
    pid = project_id(session, tenant, project)
    found = SummaryRepository(session).get_within(pid, document="content", up_to=up_to)
    if found is None:
        raise NotFound(f"Project {project!r} has no running summary.")
    row, size = found
    if style is None or style == row.style:
        check_size(row.etag, size, up_to)
        return Download.of(SUMMARY_FILE, row.content)
    # Another style's file has an ETag of its own, known once it is rendered.
    if size > up_to:
        raise Oversized(None)
    return Download.of(SUMMARY_FILE, codec.render(jsondoc.load(row.content), style))


@dataclass(frozen=True)
class PreparedSummary:
    """A running summary parsed, redacted and counted: everything that needs no database."""

    document: dict[str, Any]
    detected: Style | None
    counted: int
    warnings: list[SummaryWarning]


def prepare_summary(raw: bytes, limit: int, over_limit: OverLimit) -> PreparedSummary:
    document, detected = codec.parse_summary(raw)
    redaction.for_storage(document)
    counted = tokens.count(document["content"])
    warnings = _summary_over_limit(counted, limit, over_limit)
    return PreparedSummary(document, detected, counted, warnings)


def store_summary(
    write: Write, prepared: PreparedSummary, precondition: Precondition
) -> SummaryReceipt:
    document, detected, counted = prepared.document, prepared.detected, prepared.counted
    repository = SummaryRepository(write.sessions)
    row = write.locked(repository, precondition=precondition)
    style = detected or _file_style(row.style if row is not None else None)
    filled = []
    if codec.key_in(document, "tokenCount") is None:
        # The writer's own count is kept as given; only a missing one is filled in.
        token_key = codec.key_for("tokenCount", style)
        document[token_key] = counted
        filled.append(jsondoc.pointer(token_key))
    content = codec.render(document, style)
    created = row is None
    if row is None:
        row = MemorySummary(project_id=write.project_id)  # type: ignore[call-arg]  # set below
    set_content(row, content)
    row.style = style.value
    row.content_tokens = counted
    row.total_features_completed = codec.column_integer(
        codec.field(document, "totalFeaturesCompleted")
    )
    repository.add(row)
    return SummaryReceipt(
        created=created,
        etag=row.etag,
        style=style,
        token_count=counted,
        filled=filled,
        warnings=prepared.warnings,
    )


# Items.


def _style_of(session: Session, pid: int, kind: ItemKind) -> Style:
    row = FileStyleRepository(session).get(pid, kind.value)
    return _file_style(row.style if row is not None else None)


def _file_style(stored: str | None) -> Style:
    """A file's style as stored; camelCase, the seed's, for a file never written."""
    return Style(stored) if stored is not None else Style.camel


def _document(item: MemoryItem) -> dict[str, Any]:
    document: dict[str, Any] = jsondoc.load(item.content)
    return document


def _stored_values(kind: ItemKind, document: dict[str, Any]) -> dict[str, Any]:
    """The item's stored document (redacted in place) and every column read from it."""
    redaction.for_storage(document)
    return _columns_of(kind, document)


def _columns_of(kind: ItemKind, document: dict[str, Any]) -> dict[str, Any]:
    """The stored document of an item redacted already, and every column read from it."""
    columns = codec.item_columns(document, kind)
    content = json.dumps(document).encode("ascii")
    return {
        "kind": kind.value,
        "item_id": columns.item_id,
        "id_number": _id_number(kind, columns.item_id),
        "feature_id": columns.feature_id,
        "category": columns.category,
        "severity": columns.severity,
        "timestamp": columns.timestamp,
        "expires_at": columns.expires_at,
        "resolved": columns.resolved,
        "search_text": columns.search_text[:MAX_SEARCH_CHARS],
        **document_columns(content),
    }


def _set_document(item: MemoryItem, kind: ItemKind, document: dict[str, Any]) -> None:
    for name, value in _stored_values(kind, document).items():
        setattr(item, name, value)


def _public_fields(
    stored: dict[str, Any], document: dict[str, Any], style: Style, now: int
) -> dict[str, Any]:
    """An item as the API shows it (``MemoryItemPublic``), from its columns' values."""
    expires_at = stored["expires_at"]
    return {
        "id": stored["item_id"],
        "feature_id": stored["feature_id"],
        "category": stored["category"],
        "severity": stored["severity"],
        "timestamp": stored["timestamp"],
        "expires_at": expires_at,
        "expired": expires_at is not None and expires_at <= now,
        "resolved": stored["resolved"],
        "archived_at": stored.get("archived_at"),
        "item": codec.in_style(document, style),
    }


def _public(item: MemoryItem, style: Style, now: int) -> MemoryItemPublic:
    return MemoryItemPublic.model_validate(
        _public_fields(item.model_dump(), _document(item), style, now)
    )


def _features_completed(session: Session, pid: int) -> int:
    summary = SummaryRepository(session).get(pid)
    if summary is None or summary.total_features_completed is None:
        return 0
    return summary.total_features_completed


def list_items(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    where: ItemFilter,
    cursor: str | None,
    limit: int,
    most_bytes: int,
) -> tuple[list[MemoryItemPublic], str | None]:
    """A page of at most ``limit`` items, whose documents hold at most ``most_bytes``
    together unless the first alone holds more."""
    pid = project_id(session, tenant, project)
    style = _style_of(session, pid, kind)
    repository = ItemRepository(session)
    items, next_cursor = repository.page(pid, kind.value, where, cursor, limit, most_bytes)
    now = now_ms()
    return [_public(item, style, now) for item in items], next_cursor


def _not_found(kind: ItemKind, item_id: str) -> NotFound:
    return NotFound(f"No {kind.value} {item_id!r} in this project.")


def _locked_item(
    write: Write, kind: ItemKind, item_id: str, precondition: Precondition
) -> MemoryItem:
    # An id no document could hold (NUL, a lone surrogate) names nothing; it never reaches SQL.
    if not jsondoc.is_storable(item_id):
        raise _not_found(kind, item_id)
    return write.existing(
        ItemRepository(write.sessions),
        kind.value,
        item_id,
        missing=_not_found(kind, item_id),
        precondition=precondition,
    )


def get_item(
    session: Session, tenant: str, project: str, kind: ItemKind, item_id: str
) -> tuple[MemoryItemPublic, str]:
    pid = project_id(session, tenant, project)
    item = (
        ItemRepository(session).get(pid, kind.value, item_id)
        if jsondoc.is_storable(item_id)
        else None
    )
    if item is None:
        raise _not_found(kind, item_id)
    return _public(item, _style_of(session, pid, kind), now_ms()), item.etag


def _require_object(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise InvalidDocument("An item is a JSON object.", [("", "not an object")])
    return document


def _id_number(kind: ItemKind, item_id: str) -> int | None:
    """The number of an id of the writer's form (dec-007: 7), at most ``ID_NUMBER_CAP``."""
    match = ID_PATTERN[kind].match(item_id)
    return None if match is None else min(int(match.group(1)), ID_NUMBER_CAP)


def _next_id(repository: ItemRepository, pid: int, kind: ItemKind) -> str:
    """The writer's numbering, dec-001 and on: one past the highest number in use, from the
    index of numbers; past the cap (ids no writer makes), from the ids at the cap."""
    highest = repository.highest_id_number(pid, kind.value)
    if highest == ID_NUMBER_CAP:
        highest = max(
            int(match.group(1))
            for item_id in repository.item_ids_numbered(pid, kind.value, ID_NUMBER_CAP)
            if (match := ID_PATTERN[kind].match(item_id))
        )
    return f"{ID_PREFIX[kind]}-{(highest or 0) + 1:03d}"


@dataclass(frozen=True)
class CreatedItem:
    """A new item as the API shows it (``ItemCreated``'s fields), and its ETag."""

    fields: dict[str, Any]
    etag: str


def create_item(write: Write, kind: ItemKind, raw: bytes) -> CreatedItem:
    """A new item; a missing id and time are filled in (id first, time last) and reported.
    Ids and positions are handed out one write at a time: the write holds the project's lock."""
    document = _require_object(jsondoc.load(raw, allow_nan=False))
    body_style = codec.detect_style(document) or Style.camel
    repository = ItemRepository(write.sessions)
    filled = []
    if "id" not in document:
        document = {"id": _next_id(repository, write.project_id, kind), **document}
        filled.append("/id")
    time_field = codec.ITEM_TIME_FIELD[kind]
    if codec.key_in(document, time_field) is None:
        time_key = codec.key_for(time_field, body_style)
        document[time_key] = now_ms()
        filled.append(jsondoc.pointer(time_key))
    if faults := codec.check_item(document, kind):
        raise InvalidDocument(f"The {kind.value} does not follow seed 004's format.", faults)
    stored = _stored_values(kind, document)
    appended = repository.append(stored | {"project_id": write.project_id})
    if appended is None:
        raise Conflict(f"A {kind.value} with id {document['id']!r} exists; PATCH or PUT it.")
    fields = _public_fields(stored, document, _file_style(appended.style), now_ms())
    return CreatedItem(fields | {"filled": filled}, stored["etag"])


def patch_item(
    write: Write, kind: ItemKind, item_id: str, raw: bytes, precondition: Precondition
) -> tuple[MemoryItemPublic, str]:
    patch = _require_object(jsondoc.load(raw, allow_nan=False))
    item = _locked_item(write, kind, item_id, precondition)
    current = _document(item)
    # The patch may name documented keys in either style; they apply to the item's own.
    style = codec.detect_style(current) or Style.camel
    document = jsondoc.merge_patch(current, codec.in_style(patch, style))
    if faults := codec.check_item(document, kind):
        raise InvalidDocument(f"The patched {kind.value} is not valid.", faults)
    if document["id"] != item.item_id:
        raise InvalidContent(
            "An item's id cannot change; create a new item instead.",
            errors=[FieldError("/id", "must stay " + json.dumps(item.item_id))],
        )
    _set_document(item, kind, document)
    ItemRepository(write.sessions).add(item)
    return _public(item, _style_of(write.session, write.project_id, kind), now_ms()), item.etag


def delete_item(write: Write, kind: ItemKind, item_id: str, precondition: Precondition) -> None:
    ItemRepository(write.sessions).delete(_locked_item(write, kind, item_id, precondition))


# List files.


def _render_items(contents: list[bytes], style: Style) -> bytes:
    return codec.render([jsondoc.load(content) for content in contents], style)


def items_file(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    style: Style | None,
    up_to: int = ANY_SIZE,
) -> Download:
    """The file: every item not archived, in file order; ``Oversized``, and none of them
    read, when it could be written over ``up_to`` bytes: its items are stored compact, and
    written with two-space indents at most ``codec.MOST_WRITTEN_PER_STORED_BYTE`` times their
    size (the file's ETag is known only once it is rendered)."""
    pid = project_id(session, tenant, project)
    chosen = style or _style_of(session, pid, kind)
    stored_up_to = up_to if up_to == ANY_SIZE else up_to // codec.MOST_WRITTEN_PER_STORED_BYTE
    contents = ItemRepository(session).live_contents_within(pid, kind.value, stored_up_to)
    if contents is None:
        raise Oversized(None)
    return Download.of(ITEM_FILES[kind], _render_items(contents, chosen))


@dataclass(frozen=True)
class PreparedItems:
    """A list file parsed and redacted, each item's columns read and its file rendered in the
    style it shows: everything that needs no database."""

    documents: list[dict[str, Any]]
    columns: list[dict[str, Any]]
    detected: Style | None
    rendered: bytes | None


def prepare_items_file(raw: bytes, kind: ItemKind) -> PreparedItems:
    """Before the write's turn (on SQLite every tenant's one writer): what the replace stores,
    worked out item by item, so that the turn runs a few statements over all the rows."""
    documents, detected = codec.parse_items(raw, kind, MAX_LIST_ITEMS)
    # Redacted as one document: the sites reported are the file's (``/3/rationale``).
    redaction.for_storage(documents)
    columns = [_columns_of(kind, document) for document in documents]
    rendered = None if detected is None else codec.render(documents, detected)
    return PreparedItems(documents, columns, detected, rendered)


def store_items_file(
    write: Write, kind: ItemKind, prepared: PreparedItems, precondition: Precondition
) -> tuple[str, Style, int]:
    """Replace the file's set. Items kept by id keep their history (when they arrived);
    items no longer in the file are deleted, archived ones stay archived and untouched.

    Three statements, each run once over its rows (the driver's ``executemany``), not a
    statement and an ORM object per item: 10,000 items held SQLite's writer (every tenant's
    writes) 3.9-5.7 s through the ORM's unit of work (2026-11-27)."""
    pid = write.project_id
    repository = ItemRepository(write.sessions)
    styles = FileStyleRepository(write.sessions)
    style_row = styles.get(pid, kind.value)
    old_style = _file_style(style_row.style if style_row is not None else None)
    stored = repository.stored_items(pid, kind.value)
    live = [item.live_content for item in stored.values() if item.live_content is not None]
    precondition(etag_of(_render_items(live, old_style)) if live else None)
    style = prepared.detected or old_style
    mark = _features_completed(write.session, pid)
    changed = {"archived_at": None, "updated_at": utcnow()}
    kept, added = [], []
    for position, columns in enumerate(prepared.columns):
        row = columns | changed | {"position": position}
        found = stored.pop(columns["item_id"], None)
        if found is None:
            added.append(row | {"project_id": pid, "features_mark": mark})
        else:
            kept.append(row | {"row_id": found.id})
    repository.store_many(kept)
    repository.create_many(added)
    repository.delete_many([item.id for item in stored.values() if item.live_content is not None])
    if style_row is None:
        style_row = MemoryFileStyle(project_id=pid, kind=kind.value, style=style.value)
    style_row.style = style.value
    styles.add(style_row)
    # Rendered before the turn in the style the file shows; in the file's old one here.
    rendered = prepared.rendered
    if rendered is None:
        rendered = codec.render(prepared.documents, style)
    return etag_of(rendered), style, len(prepared.documents)


# Maintenance.


def maintain(write: Write) -> MaintenanceResult:
    """Seed 004's maintenance: archive, never delete."""
    pid = write.project_id
    repository = ItemRepository(write.sessions)
    completed = _features_completed(write.session, pid)
    now = utcnow()
    old_decisions = repository.stale(pid, "decision", completed - DECISIONS_KEPT_FOR_FEATURES)
    old_failures = repository.stale(
        pid, "failure", completed - RESOLVED_FAILURES_KEPT_FOR_FEATURES, resolved=True
    )
    expired = repository.expired(pid, int(now.timestamp() * 1000))
    return MaintenanceResult(
        total_features_completed=completed,
        archived={
            "decisions": repository.archive(old_decisions, now),
            "failures": repository.archive(old_failures, now),
            "constraints": repository.archive(expired, now),
        },
    )


# The context pack.


def _entry(item: MemoryItem, style: Style) -> packing.Entry:
    return packing.Entry(
        document=codec.in_style(_document(item), style),
        feature_id=item.feature_id,
        timestamp=item.timestamp,
        search_text=item.search_text,
    )


def _failure_candidates(
    repository: ItemRepository, pid: int, feature_id: str | None
) -> list[RankableRow]:
    """The failures the pack ranks: the feature's own newest and the project's newest, a
    bounded number of each, so that the pack costs the same with a thousand failures stored
    or a million (two index range reads, not the whole file)."""
    newest = repository.newest_rankable(pid, "failure", FAILURE_CANDIDATES)
    own = (
        repository.newest_rankable(pid, "failure", FAILURE_CANDIDATES, feature_id=feature_id)
        if feature_id
        else []
    )
    unique = {row.id: row for row in [*own, *newest]}
    # In file order, as the whole file was: ranking ties keep it.
    return sorted(unique.values(), key=lambda row: (row.position, row.id))


def _ranked_failures(
    repository: ItemRepository, pid: int, feature_id: str | None, about: str, style: Style
) -> list[packing.Entry]:
    """The pack's failures, most relevant first. Ranking reads columns only: just the
    documents of the few chosen are loaded and parsed."""
    candidates = _failure_candidates(repository, pid, feature_id)
    ranked = packing.rank_failures(candidates, feature_id, about)[: packing.MAX_FAILURES]
    chosen = [row.id for row in ranked]
    if not chosen:
        return []
    # A failure deleted since it was ranked (PostgreSQL reads what has committed by each
    # statement) is left out, as it would be had the pack come a moment later.
    items = {item.id: item for item in repository.items(chosen)}
    return [_entry(items[item_id], style) for item_id in chosen if item_id in items]


def context_pack(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str | None,
    about: str | None,
    max_tokens: int,
) -> ContextPack:
    pid = project_id(session, tenant, project)
    repository = ItemRepository(session)
    summary_row = SummaryRepository(session).get(pid)
    summary = None
    if summary_row is not None:
        summary = codec.field(jsondoc.load(summary_row.content), "content")

    # The three files' styles in one read.
    styles = FileStyleRepository(session).styles(pid)

    def style(kind: ItemKind) -> Style:
        return _file_style(styles.get(kind.value))

    def entries(kind: ItemKind, items: list[MemoryItem]) -> list[packing.Entry]:
        return [_entry(item, style(kind)) for item in items]

    decisions = entries(
        ItemKind.decision, repository.newest(pid, "decision", packing.MAX_DECISIONS)
    )
    # The feature's text: what the caller says about it and its own decisions.
    own_text = [e.search_text for e in decisions if feature_id and e.feature_id == feature_id]
    about_feature = "\n".join([about or "", *own_text])
    ranked = _ranked_failures(repository, pid, feature_id, about_feature, style(ItemKind.failure))
    constraints = entries(ItemKind.constraint, repository.active_constraints(pid, now_ms()))
    # Raises ConstraintsOverBudget when the active constraints alone exceed max_tokens.
    built = packing.build(feature_id, summary, decisions, ranked, constraints, max_tokens)
    return ContextPack(
        feature_id=built.feature,
        max_tokens=max_tokens,
        token_count=built.token_count,
        summary=built.summary,
        summary_truncated=built.summary_truncated,
        decisions=[e.document for e in built.decisions],
        failures=[e.document for e in built.failures],
        constraints=[e.document for e in built.constraints],
        dropped=built.dropped,
        markdown=built.markdown,
    )
