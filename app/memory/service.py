"""The rules of project memory: files in either key style, items, expiry, maintenance, packs."""

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import Row
from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import utcnow
from app.core.errors import Conflict, FieldError, InvalidContent, NotFound
from app.formats import jsondoc
from app.formats import project_memory as codec
from app.formats.errors import InvalidDocument
from app.formats.project_memory import ItemKind, Style
from app.memory import pack as packing
from app.memory import tokens
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.memory.repository import WORD, ItemFilter, MemoryRepository
from app.memory.schemas import (
    ContextPack,
    ItemCreated,
    MaintenanceResult,
    MemoryItemPublic,
    SummaryReceipt,
    SummaryWarning,
)
from app.projects.service import project_id, touch_project

SUMMARY_FILE = "running-summary.json"
ITEM_FILES = {
    ItemKind.decision: "key-decisions.json",
    ItemKind.failure: "failure-memory.json",
    ItemKind.constraint: "active-constraints.json",
}
ID_PREFIX = {ItemKind.decision: "dec", ItemKind.failure: "fail", ItemKind.constraint: "con"}
# Seed 004, "Maintenance": decisions archived after 50 features, resolved failures after 100.
DECISIONS_KEPT_FOR_FEATURES = 50
RESOLVED_FAILURES_KEPT_FOR_FEATURES = 100
# The pack ranks at most this many of a feature's own failures and of the project's newest.
FAILURE_CANDIDATES = 500
# Search covers this much of an item's text: PostgreSQL refuses a tsvector over 1 MB.
MAX_SEARCH_CHARS = 100_000


@dataclass(frozen=True)
class MemoryFile:
    filename: str
    etag: str
    content: bytes


def now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


def _file(filename: str, content: bytes) -> MemoryFile:
    return MemoryFile(filename=filename, etag=etag_of(content), content=content)


def _no_words(parameter: str) -> InvalidContent:
    return InvalidContent(
        "The search has no words to look for.",
        errors=[FieldError(f"query.{parameter}", "needs at least one letter or digit")],
    )


def _check_query_text(parameter: str, value: str | None) -> None:
    if value is not None and not jsondoc.is_storable(value):
        raise InvalidContent(
            "A query parameter holds a character the store cannot compare.",
            errors=[FieldError(f"query.{parameter}", "NUL and lone surrogates are not allowed")],
        )


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


def summary_file(session: Session, tenant: str, project: str, style: Style | None) -> MemoryFile:
    row = MemoryRepository(session).summary(project_id(session, tenant, project))
    if row is None:
        raise NotFound(f"Project {project!r} has no running summary.")
    if style is None or style == row.style:
        return _file(SUMMARY_FILE, row.content)
    return _file(SUMMARY_FILE, codec.render(jsondoc.load(row.content), style))


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


def put_summary(
    session: Session,
    tenant: str,
    project: str,
    raw: bytes,
    precondition: Precondition,
    limit: int,
    over_limit: OverLimit,
) -> SummaryReceipt:
    return store_summary(
        session, tenant, project, prepare_summary(raw, limit, over_limit), precondition
    )


def store_summary(
    session: Session,
    tenant: str,
    project: str,
    prepared: PreparedSummary,
    precondition: Precondition,
) -> SummaryReceipt:
    document, detected, counted = prepared.document, prepared.detected, prepared.counted
    pid = touch_project(session, tenant, project)
    repository = MemoryRepository(session)
    row = repository.summary(pid, for_update=True)
    precondition(row.etag if row is not None else None)
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
        row = MemorySummary(project_id=pid)  # type: ignore[call-arg]  # its columns: below
    row.content = content
    row.style = style.value
    row.content_tokens = counted
    row.total_features_completed = codec.column_integer(
        codec.field(document, "totalFeaturesCompleted")
    )
    row.etag = etag_of(content)
    row.updated_at = utcnow()
    repository.save(row)
    return SummaryReceipt(
        created=created,
        etag=row.etag,
        style=style,
        token_count=counted,
        filled=filled,
        warnings=prepared.warnings,
    )


# Items.


def _style_of(repository: MemoryRepository, pid: int, kind: ItemKind) -> Style:
    row = repository.file_style(pid, kind.value)
    return _file_style(row.style if row is not None else None)


def _file_style(stored: str | None) -> Style:
    """A file's style as stored; camelCase, the seed's, for a file never written."""
    return Style(stored) if stored is not None else Style.camel


def _document(item: MemoryItem) -> dict[str, Any]:
    document: dict[str, Any] = jsondoc.load(item.content)
    return document


def _set_document(item: MemoryItem, kind: ItemKind, document: dict[str, Any]) -> None:
    """Store the item's document (redacted in place) and every column read from it."""
    redaction.for_storage(document)
    columns = codec.item_columns(document, kind)
    item.kind = kind.value
    item.item_id = columns.item_id
    item.feature_id = columns.feature_id
    item.category = columns.category
    item.severity = columns.severity
    item.timestamp = columns.timestamp
    item.expires_at = columns.expires_at
    item.resolved = columns.resolved
    item.search_text = columns.search_text[:MAX_SEARCH_CHARS]
    item.content = json.dumps(document).encode("ascii")
    item.etag = etag_of(item.content)
    item.updated_at = utcnow()


def _public(item: MemoryItem, style: Style, now: int) -> MemoryItemPublic:
    return MemoryItemPublic(
        id=item.item_id,
        feature_id=item.feature_id,
        category=item.category,
        severity=item.severity,
        timestamp=item.timestamp,
        expires_at=item.expires_at,
        expired=item.expires_at is not None and item.expires_at <= now,
        resolved=item.resolved,
        archived_at=item.archived_at,
        item=codec.in_style(_document(item), style),
    )


def _features_completed(repository: MemoryRepository, pid: int) -> int:
    summary = repository.summary(pid)
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
) -> tuple[list[MemoryItemPublic], str | None]:
    for name in ("feature_id", "category", "severity", "q"):
        _check_query_text(name, getattr(where, name))
    if where.q is not None and not WORD.search(where.q):
        raise _no_words("q")
    pid = project_id(session, tenant, project)
    repository = MemoryRepository(session)
    style = _style_of(repository, pid, kind)
    items, next_cursor = repository.page(pid, kind.value, where, cursor, limit)
    now = now_ms()
    return [_public(item, style, now) for item in items], next_cursor


def _not_found(kind: ItemKind, item_id: str) -> NotFound:
    return NotFound(f"No {kind.value} {item_id!r} in this project.")


def _find(
    session: Session, pid: int, kind: ItemKind, item_id: str, *, for_update: bool = False
) -> MemoryItem:
    # An id no document could hold (NUL, a lone surrogate) names nothing; it never reaches SQL.
    if not jsondoc.is_storable(item_id):
        raise _not_found(kind, item_id)
    item = MemoryRepository(session).get(pid, kind.value, item_id, for_update=for_update)
    if item is None:
        raise _not_found(kind, item_id)
    return item


def get_item(
    session: Session, tenant: str, project: str, kind: ItemKind, item_id: str
) -> tuple[MemoryItemPublic, str]:
    pid = project_id(session, tenant, project)
    item = _find(session, pid, kind, item_id)
    style = _style_of(MemoryRepository(session), pid, kind)
    return _public(item, style, now_ms()), item.etag


def _require_object(document: Any) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise InvalidDocument("An item is a JSON object.", [("", "not an object")])
    return document


def _next_id(repository: MemoryRepository, pid: int, kind: ItemKind) -> str:
    """The writer's numbering, dec-001 and on: one past the highest number in use."""
    pattern = re.compile(re.escape(ID_PREFIX[kind]) + r"-(\d+)$")
    numbers = [
        int(m.group(1)) for i in repository.item_ids(pid, kind.value) if (m := pattern.match(i))
    ]
    return f"{ID_PREFIX[kind]}-{max(numbers, default=0) + 1:03d}"


def create_item(
    session: Session, tenant: str, project: str, kind: ItemKind, raw: bytes
) -> tuple[ItemCreated, str]:
    """A new item; a missing id and time are filled in (id first, time last) and reported."""
    document = _require_object(jsondoc.load(raw, allow_nan=False))
    body_style = codec.detect_style(document) or Style.camel
    # touch_project locks the project's row until commit: ids and positions are handed out
    # one request at a time.
    pid = touch_project(session, tenant, project)
    repository = MemoryRepository(session)
    filled = []
    if "id" not in document:
        document = {"id": _next_id(repository, pid, kind), **document}
        filled.append("/id")
    time_field = codec.ITEM_TIME_FIELD[kind]
    if codec.key_in(document, time_field) is None:
        time_key = codec.key_for(time_field, body_style)
        document[time_key] = now_ms()
        filled.append(jsondoc.pointer(time_key))
    if faults := codec.check_item(document, kind):
        raise InvalidDocument(f"The {kind.value} does not follow seed 004's format.", faults)
    context = repository.new_item_context(pid, kind.value, document["id"])
    if context.id_taken:
        raise Conflict(f"A {kind.value} with id {document['id']!r} exists; PATCH or PUT it.")
    item = MemoryItem(  # type: ignore[call-arg]  # the document's columns: _set_document
        project_id=pid, position=context.position, features_mark=context.features_completed
    )
    _set_document(item, kind, document)
    repository.save(item)
    public = _public(item, _file_style(context.style), now_ms())
    return ItemCreated(**public.model_dump(), filled=filled), item.etag


def patch_item(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    item_id: str,
    raw: bytes,
    precondition: Precondition,
) -> tuple[MemoryItemPublic, str]:
    patch = _require_object(jsondoc.load(raw, allow_nan=False))
    pid = touch_project(session, tenant, project)
    item = _find(session, pid, kind, item_id, for_update=True)
    precondition(item.etag)
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
    repository = MemoryRepository(session)
    repository.save(item)
    return _public(item, _style_of(repository, pid, kind), now_ms()), item.etag


def delete_item(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    item_id: str,
    precondition: Precondition,
) -> None:
    pid = touch_project(session, tenant, project)
    item = _find(session, pid, kind, item_id, for_update=True)
    precondition(item.etag)
    MemoryRepository(session).delete(item)


# List files.


def _render_items(items: list[MemoryItem], style: Style) -> bytes:
    return codec.render([_document(item) for item in items], style)


def items_file(
    session: Session, tenant: str, project: str, kind: ItemKind, style: Style | None
) -> MemoryFile:
    """The file: every item not archived, in file order."""
    pid = project_id(session, tenant, project)
    repository = MemoryRepository(session)
    chosen = style or _style_of(repository, pid, kind)
    return _file(ITEM_FILES[kind], _render_items(repository.live(pid, kind.value), chosen))


@dataclass(frozen=True)
class PreparedItems:
    """A list file parsed and redacted: everything that needs no database."""

    documents: list[dict[str, Any]]
    detected: Style | None


def prepare_items_file(raw: bytes, kind: ItemKind) -> PreparedItems:
    documents, detected = codec.parse_items(raw, kind)
    return PreparedItems(redaction.for_storage(documents), detected)


def put_items_file(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    raw: bytes,
    precondition: Precondition,
) -> tuple[str, Style, int]:
    return store_items_file(
        session, tenant, project, kind, prepare_items_file(raw, kind), precondition
    )


def store_items_file(
    session: Session,
    tenant: str,
    project: str,
    kind: ItemKind,
    prepared: PreparedItems,
    precondition: Precondition,
) -> tuple[str, Style, int]:
    """Replace the file's set. Items kept by id keep their history (when they arrived);
    items no longer in the file are deleted, archived ones stay archived and untouched."""
    documents, detected = prepared.documents, prepared.detected
    pid = touch_project(session, tenant, project)
    repository = MemoryRepository(session)
    style_row = repository.file_style(pid, kind.value)
    existing = {item.item_id: item for item in repository.all_of(pid, kind.value)}
    live = [item for item in existing.values() if item.archived_at is None]
    old_style = _file_style(style_row.style if style_row is not None else None)
    precondition(etag_of(_render_items(live, old_style)) if live else None)
    style = detected or old_style
    mark = _features_completed(repository, pid)
    for position, document in enumerate(documents):
        item = existing.pop(document["id"], None)
        if item is None:
            # A new item's other columns: below, and _set_document.
            item = MemoryItem(project_id=pid, features_mark=mark)  # type: ignore[call-arg]
        item.position = position
        item.archived_at = None
        _set_document(item, kind, document)
        repository.save(item)
    for item in existing.values():
        if item.archived_at is None:
            repository.delete(item)
    if style_row is None:
        style_row = MemoryFileStyle(project_id=pid, kind=kind.value, style=style.value)
    style_row.style = style.value
    repository.save(style_row)
    return etag_of(codec.render(documents, style)), style, len(documents)


# Maintenance.


def maintain(session: Session, tenant: str, project: str) -> MaintenanceResult:
    """Seed 004's maintenance: archive, never delete."""
    pid = touch_project(session, tenant, project)
    repository = MemoryRepository(session)
    completed = _features_completed(repository, pid)
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
    repository: MemoryRepository, pid: int, feature_id: str | None
) -> list[Row[Any]]:
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
    repository: MemoryRepository, pid: int, feature_id: str | None, about: str, style: Style
) -> list[packing.Entry]:
    """The pack's failures, most relevant first. Ranking reads columns only: just the
    documents of the few chosen are loaded and parsed."""
    rows = _failure_candidates(repository, pid, feature_id)
    shells = [packing.Entry({}, row.feature_id, row.timestamp, row.search_text) for row in rows]
    row_id = {id(shell): row.id for shell, row in zip(shells, rows, strict=True)}
    ranked = packing.rank_failures(shells, feature_id, about)[: packing.MAX_FAILURES]
    chosen = [row_id[id(shell)] for shell in ranked]
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
    repository = MemoryRepository(session)
    summary_row = repository.summary(pid)
    summary = None
    if summary_row is not None:
        summary = codec.field(jsondoc.load(summary_row.content), "content")

    # The three files' styles in one read.
    styles = repository.file_styles(pid)

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
    try:
        built = packing.build(
            feature_id,
            summary,
            decisions,
            ranked,
            constraints,
            max_tokens,
        )
    except packing.ConstraintsOverBudget as exc:
        raise InvalidContent(
            f"The {len(constraints)} active constraints alone take {exc.needed} tokens, "
            f"over max_tokens={max_tokens}; every active constraint must be in the pack.",
            errors=[FieldError("query.max_tokens", f"at least {exc.needed} needed")],
        ) from exc
    return ContextPack(
        feature_id=feature_id,
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
