"""The project archive: every file of a project in the tools' on-disk layout, out and in.

Export reads the table of contents first, then each document through its own domain's
service, one at a time, so the archive's members are byte for byte what each export route
answers; the archive is written whole (to a spool) before it is sent. Import hands each
member to the same service functions as its own import route (their pure prepare step first,
for every member, then their store step), each in a savepoint of its own: a bad member is
reported with the problem its route would have answered and never undoes or stops the others.
"""

import bisect
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO, TypeVar

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from app.agents import service as agents
from app.archive import layout
from app.archive.layout import Kind, Target
from app.archive.repository import ArchiveRepository
from app.archive.schemas import (
    ArchiveMember,
    ArchiveReport,
    ImportedMember,
    MemberWarning,
    RefusedMember,
    SkippedMember,
)
from app.core.constraints import IDENTIFIER_PATTERN, IDENTIFIER_RULE
from app.core.db import Database, WriteSession, session_scope
from app.core.documents import Download
from app.core.errors import (
    Conflict,
    ContentTooLarge,
    FieldError,
    InvalidContent,
    MalformedBody,
    NotFound,
    Problem,
    format_problem,
)
from app.core.limits import HeldBody
from app.core.pagination import cursor_seal, decode_position, encode_position
from app.features import service as features
from app.formats import agent_memory, mdan_save
from app.formats import archive as archive_format
from app.formats import gzip as gzip_format
from app.formats.agent_memory import NDJSON_MEDIA_TYPE, MemoryKind
from app.formats.errors import FormatError, Notes
from app.formats.gzip import is_gzip
from app.formats.project_memory import ItemKind
from app.memory import service as memory
from app.memory.schemas import FileReceipt
from app.projects.service import project_id
from app.runs import service as runs
from app.saves import service as saves
from app.saves.service import COMPRESS_OVER_BYTES
from app.storage.writes import Write, begin_write

# Names from the layout's paths become path parameters of the member's own route.
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_ITEM_FILE_KINDS = {
    filename.removesuffix(".json"): kind for kind, filename in memory.ITEM_FILES.items()
}
_SUMMARY_FILE = memory.SUMMARY_FILE.removesuffix(".json")


def _no_precondition(_etag: str | None) -> None:
    """An archive carries no ETags: each member replaces what it names, as a file does."""


def _mtime(moment: datetime | None) -> int:
    return int(moment.timestamp()) if moment is not None else 0


# Export.


@dataclass(frozen=True)
class PlannedMember:
    path: str
    mtime: int
    read: Callable[[Session], Download]


def plan_export(session: Session, tenant: str, project: str) -> list[PlannedMember]:
    """The archive's members in order (404 for a project the tenant does not have)."""
    contents = ArchiveRepository(session, project_id(session, tenant, project))
    planned: dict[str, PlannedMember] = {}

    # Each reader binds the loop's values as default arguments; mypy cannot infer such a lambda
    # against Callable[[Session], Download] (it can against ...: what it returns is checked).
    def add(path: str, moment: datetime | None, read: Callable[..., Download]) -> None:
        planned[path] = PlannedMember(path, _mtime(moment), read)

    for save_id, filename, gzipped, stored_at in contents.saves():
        # Two saves of the same second share a file name: the later one wins, as on disk.
        add(
            layout.save_path(filename + (".gz" if gzipped else "")),
            stored_at,
            lambda s, i=save_id: saves.get_file(s, tenant, project, i),
        )
    for agent, updated_at in contents.snapshots():
        add(
            layout.snapshot_path(agent),
            updated_at,
            lambda s, a=agent: agents.get_snapshot(s, tenant, project, a),
        )
    for agent, kind_name, appended_at in contents.agent_memory_files():
        kind = MemoryKind(kind_name)
        add(
            layout.agent_memory_path(agent, kind),
            appended_at,
            lambda s, a=agent, k=kind: agents.memory_file(s, tenant, project, a, k),
        )
    for run, has_backup, modified_at in contents.runs():
        add(
            layout.state_path(run),
            modified_at,
            lambda s, r=run: runs.get_file(s, tenant, project, r),
        )
        if has_backup:
            add(
                layout.backup_path(run),
                modified_at,
                lambda s, r=run: runs.get_backup(s, tenant, project, r),
            )
    for feature, updated_at in contents.features():
        add(
            layout.context_path(feature),
            updated_at,
            lambda s, f=feature: features.download(s, tenant, project, features.CONTEXT, f),
        )
    for feature, updated_at in contents.workflows():
        add(
            layout.workflow_path(feature),
            updated_at,
            lambda s, f=feature: features.download(s, tenant, project, features.WORKFLOW, f),
        )
    if (summary_at := contents.summary_time()) is not None:
        add(
            layout.memory_file_path(_SUMMARY_FILE),
            summary_at,
            lambda s: memory.summary_file(s, tenant, project, None),
        )
    written = contents.memory_file_kinds()
    for name, item_kind in _ITEM_FILE_KINDS.items():
        if item_kind.value in written:
            add(
                layout.memory_file_path(name),
                written[item_kind.value],
                lambda s, k=item_kind: memory.items_file(s, tenant, project, k, None),
            )
    return list(planned.values())


# The archive's members, by path: its cursors' list, bound to the tenant and project.
MEMBER_LIST = "archive.members"
MEMBER_TYPES = [str]


def list_members(
    session: Session, tenant: str, project: str, cursor: str | None, limit: int
) -> tuple[list[ArchiveMember], str | None]:
    """A page of the archive's members by path, from the listings the export plans with (names
    and times, no contents): what a client lists without building the archive."""
    paths = sorted(member.path for member in plan_export(session, tenant, project))
    seal, scope = cursor_seal(session), (tenant, project)
    if cursor is not None:
        (after,) = decode_position(seal, MEMBER_LIST, scope, MEMBER_TYPES, cursor)
        paths = paths[bisect.bisect_right(paths, after) :]
    page = [ArchiveMember(path=path) for path in paths[:limit]]
    if len(paths) <= limit:
        return page, None
    return page, encode_position(seal, MEMBER_LIST, scope, MEMBER_TYPES, [page[-1].path])


def write_archive(session: Session, tenant: str, project: str, level: int, out: BinaryIO) -> None:
    """Write the project's .tar.gz into ``out``, every member read from one snapshot (404 for
    a project the tenant does not have). Reads the whole archive before a byte is sent, so
    that the caller can give the session's connection back before the client reads."""
    writer = archive_format.ArchiveWriter(level)
    for member in plan_export(session, tenant, project):
        out.write(writer.add(member.path, member.read(session).content, member.mtime))
        # The member's rows: the session would otherwise keep every document it has read
        # until it closes, the whole project in memory.
        session.expunge_all()
    out.write(writer.finish())


# Import.
#
# In three phases, so that the database's writer (SQLite's only one) is held only for writes:
# 1. admit: read the tar, refuse or skip what is not a file of the layout, inflate the
#    `.json.gz` saves, and refuse the whole archive (413) when its files inflate past the
#    bulk limit in total; nothing is written.
# 2. prepare: each member through its kind's pure step (parse, redact, render, compress),
#    still without the database.
# 3. write: the prepared members in bounded batches, each batch a transaction of its own,
#    each member in a savepoint of its own within it.

# A batch ends after this many bytes of members, or this many members: other writers (other
# tenants') take the writer between two batches.
BATCH_BYTES = 4 * 1024 * 1024
BATCH_MEMBERS = 100
# SQLAlchemy's pool hands a connection given back to whichever thread asks first, and the
# import asks again at once: a short sleep between batches lets a writer that was waiting
# for the connection (another request) take it.
BATCH_PAUSE_SECONDS = 0.01


@dataclass(frozen=True)
class Limits:
    member_bytes: int
    save_bytes: int
    summary_tokens: int


@dataclass(frozen=True)
class Member:
    path: str
    target: Target
    content: bytes


@dataclass
class Outcome:
    status: int
    action: str
    result: dict[str, Any]
    warnings: list[tuple[str, str]] = field(default_factory=list)


class Skip(Exception):
    """The member is left out on purpose; the reason says why."""


class _Unchanged(Exception):
    """Raised in a member's savepoint to roll back a write that changed nothing."""


def _checked_name(target: Target, parameter: str) -> str:
    if not _IDENTIFIER.fullmatch(target.name):
        raise InvalidContent(
            f"{target.name!r} is not a valid {parameter} name.",
            errors=[FieldError(f"path.{parameter}", f"must be {IDENTIFIER_RULE}")],
        )
    return target.name


# Kinds whose import replaces the stored file with the member.
_REPLACING_KINDS = frozenset(
    {
        Kind.snapshot,
        Kind.run_state,
        Kind.run_backup,
        Kind.feature_context,
        Kind.feature_workflow,
        Kind.memory_file,
    }
)


def _stored_files(session: Session, tenant: str, project: str) -> dict[str, PlannedMember]:
    """The project's files as the import found them, by archive path (none for a project
    the import creates)."""
    try:
        return {member.path: member for member in plan_export(session, tenant, project)}
    except NotFound:
        return {}


class Importer:
    """The write phase: each step of the plan, in the session of its batch."""

    def __init__(self, tenant: str, project: str) -> None:
        self.tenant = tenant
        self.project = project
        self.imported: list[ImportedMember] = []
        # The first MAX_LISTED of each: an archive of 130,000 members refused answered 38.8 MB
        # and, under an Idempotency-Key, stored it (2026-11-27).
        self.warnings: Notes[MemberWarning] = Notes()
        self.refused: Notes[RefusedMember] = Notes()
        self.skipped: Notes[SkippedMember] = Notes()
        self.reset_runs: set[str] = set()
        self._session: Session | None = None
        self._stored: dict[str, PlannedMember] | None = None
        self._write: Write | None = None

    def begin(self, session: Session) -> None:
        """A new batch: its session, and the project's files read again in it."""
        self._session = session
        self._stored = None

    @property
    def session(self) -> Session:
        assert self._session is not None, "begin() a batch first"
        return self._session

    @property
    def write(self) -> Write:
        """The member's write: the project locked, in the member's savepoint."""
        assert self._write is not None, "members are written in _import"
        return self._write

    @property
    def stored(self) -> dict[str, PlannedMember]:
        if self._stored is None:
            self._stored = _stored_files(self.session, self.tenant, self.project)
        return self._stored

    def report(self) -> ArchiveReport:
        return ArchiveReport(
            imported=self.imported,
            warnings=list(self.warnings),
            warnings_truncated=self.warnings.more,
            refused=list(self.refused),
            refused_truncated=self.refused.more,
            skipped=list(self.skipped),
            skipped_truncated=self.skipped.more,
        )

    def refuse(self, path: str, problem: Problem) -> None:
        if not self.refused.room():
            return
        body = problem.body()
        self.refused.append(
            RefusedMember(
                path=path,
                type=body["type"],
                title=body["title"],
                status=body["status"],
                detail=body["detail"],
                errors=body.get("errors", []),
            )
        )

    def skip(self, path: str, reason: str) -> None:
        self.skipped.append(SkippedMember(path=path, reason=reason))

    def _import(self, member: Member, write: "MemberWrite") -> Outcome:
        """The member's prepared write, in a savepoint. A file that replaces what it names
        and leaves the project's copy byte for byte as it was (the same file, or one that
        stores as the same: a redacted secret, a version 1 state migrated again) is
        ``unchanged``: its savepoint is rolled back, so no time moves and pushing twice
        changes nothing. Saves and agent memory recognise what they hold in their writes."""
        stored = self.stored.get(member.path) if member.target.kind in _REPLACING_KINDS else None
        before = stored.read(self.session) if stored is not None else None
        try:
            with self.session.begin_nested():
                # The project's lock first, as every write takes it (in the savepoint: a
                # member refused leaves no project behind).
                sessions = WriteSession(self.session.connection(), self.session)
                self._write = begin_write(sessions, self.tenant, self.project)
                outcome = write(self)
                after = stored.read(self.session) if stored is not None else None
                if before is not None and after is not None and after.content == before.content:
                    raise _Unchanged
        except _Unchanged:
            # The stored version's tag (a document changed by appends has one of its own).
            assert before is not None
            return Outcome(200, "unchanged", {"etag": before.etag})
        return outcome

    def run(self, member: Member, prepared: "MemberWrite | Exception") -> None:
        """Write a prepared member and report it; or report why preparing it failed."""
        try:
            if isinstance(prepared, Exception):
                raise prepared
            outcome = self._import(member, prepared)
        except Skip as exc:
            self.skip(member.path, str(exc))
        except FormatError as exc:
            self.refuse(member.path, format_problem(exc))
        except Problem as exc:
            self.refuse(member.path, exc)
        except IntegrityError:
            self.refuse(
                member.path, Conflict("The change conflicts with a concurrent change; retry it.")
            )
        else:
            self.imported.append(
                ImportedMember(
                    path=member.path,
                    kind=member.target.kind,
                    status=outcome.status,
                    action=outcome.action,
                    result=outcome.result,
                )
            )
            for pointer, message in outcome.warnings:
                if not self.warnings.room():
                    break
                self.warnings.append(
                    MemberWarning(path=member.path, pointer=pointer, message=message)
                )

    # One write per kind of file: the store step of the member's own route's service.

    def save(self, member: Member, prepared: saves.PreparedSave) -> Outcome:
        """Pushing a directory again adds nothing: a save already stored under that name
        with that file, as it would be stored (redacted), is ``unchanged``."""
        existing = saves.stored_copy(self.write, prepared)
        if existing is not None:
            return Outcome(200, "unchanged", {"id": existing})
        # No automatic pruning: an archive restores a project's saves, it does not retire them.
        receipt = saves.store_save(self.write, prepared, auto_prune=False).receipt
        warnings = [(warning.path, warning.message) for warning in receipt.warnings]
        warnings += [
            ("", f"{count} secret(s) of kind {kind} redacted")
            for kind, count in receipt.redactions.items()
        ]
        exported_as = receipt.filename + (".gz" if receipt.size_bytes > COMPRESS_OVER_BYTES else "")
        if layout.save_path(exported_as) != member.path:
            warnings.append(("", f"exported as {layout.save_path(exported_as)}"))
        return Outcome(201, "created", receipt.model_dump(mode="json"), warnings)

    def snapshot(self, agent: str, prepared: agents.PreparedSnapshot) -> Outcome:
        stored = agents.store_snapshot(self.write, agent, prepared, _no_precondition)
        action = "created" if stored.created else "replaced"
        return Outcome(201 if stored.created else 200, action, stored.receipt.model_dump())

    def agent_memory(self, agent: str, kind: MemoryKind, items: list[dict[str, Any]]) -> Outcome:
        """The file on disk is the whole history: only the lines the store lacks are
        appended, so that pushing a directory twice appends nothing the second time. A
        raw_traces.jsonl that autobyteus pruned since (whole turns gone, moved to its
        raw_traces_archive.jsonl) prunes the same turns here first. Lines compare as stored
        (redacted), so a file holding a secret is the start of its stored copy."""
        lines = [agent_memory.render_line(item) for item in items]
        stored = agents.memory_lines(self.write, agent, kind)
        pruned = 0
        warnings: list[tuple[str, str]] = []
        if lines[: len(stored)] != stored:
            turns = (
                agent_memory.pruned_turns(stored, lines) if kind is MemoryKind.raw_trace else None
            )
            if turns is None:
                raise Conflict(
                    f"The stored {agent_memory.FILENAMES[kind]} is not the start of this file: "
                    "the two histories differ, and nothing was appended."
                )
            pruned = agents.prune_raw_traces(self.write, agent, turns)
            warnings.append(
                ("", f"{pruned} raw trace(s) of {len(turns)} turn(s) pruned, as in the file")
            )
        new = items[len(stored) - pruned :]
        appended = agents.store_memory(self.write, agent, kind, new) if new else 0
        status = 201 if appended else 200
        if pruned:
            return Outcome(status, "pruned", {"pruned": pruned, "appended": appended}, warnings)
        return Outcome(status, "appended" if appended else "unchanged", {"appended": appended})

    def run_state(self, run: str, prepared: runs.PreparedLoad) -> Outcome:
        """atari's own load (``state:load``): a file from disk may be of version 1, or one
        atari itself would set aside; the outcome says which."""
        loaded = runs.store_load(self.write, run, prepared)
        warnings = [(notice.path, notice.message) for notice in loaded.notices]
        if loaded.outcome != "stored":
            warnings.append(("", f"{loaded.outcome}: {loaded.reason}"))
        if loaded.outcome == "reset":
            self.reset_runs.add(run)
        return Outcome(200, loaded.outcome, loaded.model_dump(mode="json"), warnings)

    def run_backup(self, run: str, backup: bytes) -> Outcome:
        if run in self.reset_runs:
            raise Skip(
                "superseded: loading this archive's state.json set that file aside as the "
                "backup, as atari does"
            )
        summary = runs.store_backup(self.write, run, backup)
        return Outcome(200, "replaced", summary.model_dump(mode="json"))

    def feature_file(
        self,
        file: features.FeatureFile[Any, features.Prepared],
        feature: str,
        prepared: features.Prepared,
    ) -> Outcome:
        row, created = file.store(self.write, feature, prepared, _no_precondition)
        summary = file.summary.model_validate(row, from_attributes=True)
        action = "created" if created else "replaced"
        return Outcome(201 if created else 200, action, summary.model_dump(mode="json"))

    def summary_file(self, prepared: memory.PreparedSummary) -> Outcome:
        receipt = memory.store_summary(self.write, prepared, _no_precondition)
        warnings = [(pointer, "missing; filled in by the service") for pointer in receipt.filled]
        warnings += [(warning.pointer, warning.message) for warning in receipt.warnings]
        action = "created" if receipt.created else "replaced"
        status = 201 if receipt.created else 200
        return Outcome(status, action, receipt.model_dump(mode="json"), warnings)

    def items_file(self, kind: ItemKind, prepared: memory.PreparedItems) -> Outcome:
        etag, style, count = memory.store_items_file(self.write, kind, prepared, _no_precondition)
        receipt_body = FileReceipt(etag=etag, style=style, items=count).model_dump(mode="json")
        return Outcome(200, "replaced", receipt_body)


# What the write phase does with a prepared member.
MemberWrite = Callable[[Importer], Outcome]


# One prepare step per kind of file: the pure part of the member's own route's service (its
# parse, redaction, rendering and compression), and the write that stores the result.


def _prepare_save(member: Member, _limits: Limits) -> MemberWrite:
    """The save under the name it came with (``.gz`` aside; admission inflated it)."""
    filename = member.target.name.removesuffix(".gz")
    if not mdan_save.is_filename(filename):
        raise InvalidContent(
            f"{member.target.name!r} is not the name of a save file.",
            errors=[FieldError("path.filename", f"must be {mdan_save.FILENAME_RULE}")],
        )
    prepared = saves.prepare_save(member.content, filename)
    return lambda importer: importer.save(member, prepared)


def _prepare_snapshot(member: Member, _limits: Limits) -> MemberWrite:
    agent = _checked_name(member.target, "agent")
    prepared = agents.prepare_snapshot(member.content, agent)
    return lambda importer: importer.snapshot(agent, prepared)


def _prepare_agent_memory(member: Member, _limits: Limits) -> MemberWrite:
    agent = _checked_name(member.target, "agent")
    kind = member.target.memory_kind
    assert kind is not None
    if not member.content.strip():
        raise Skip("empty: no items to append")
    items = agents.prepare_memory(member.content, NDJSON_MEDIA_TYPE, kind)
    return lambda importer: importer.agent_memory(agent, kind, items)


def _prepare_run_state(member: Member, _limits: Limits) -> MemberWrite:
    run = _checked_name(member.target, "run")
    prepared = runs.prepare_load(member.content)
    return lambda importer: importer.run_state(run, prepared)


def _prepare_run_backup(member: Member, _limits: Limits) -> MemberWrite:
    run = _checked_name(member.target, "run")
    backup = runs.prepare_backup(member.content)
    return lambda importer: importer.run_backup(run, backup)


def _prepare_feature_file(
    file: features.FeatureFile[Any, Any],
) -> Callable[[Member, Limits], MemberWrite]:
    def prepare(member: Member, _limits: Limits) -> MemberWrite:
        feature = _checked_name(member.target, "feature")
        prepared = file.prepare(member.content)
        return lambda importer: importer.feature_file(file, feature, prepared)

    return prepare


def _prepare_memory_file(member: Member, limits: Limits) -> MemberWrite:
    if member.target.name == _SUMMARY_FILE:
        summary = memory.prepare_summary(
            member.content, limits.summary_tokens, memory.OverLimit.warn
        )
        return lambda importer: importer.summary_file(summary)
    kind: ItemKind = _ITEM_FILE_KINDS[member.target.name]
    items = memory.prepare_items_file(member.content, kind)
    return lambda importer: importer.items_file(kind, items)


PREPARERS: dict[Kind, Callable[[Member, Limits], MemberWrite]] = {
    Kind.save: _prepare_save,
    Kind.snapshot: _prepare_snapshot,
    Kind.agent_memory: _prepare_agent_memory,
    Kind.run_state: _prepare_run_state,
    Kind.run_backup: _prepare_run_backup,
    Kind.feature_context: _prepare_feature_file(features.CONTEXT),
    Kind.feature_workflow: _prepare_feature_file(features.WORKFLOW),
    Kind.memory_file: _prepare_memory_file,
}


@dataclass(frozen=True)
class Step:
    """One entry of the archive as the write phase takes it: what to do (write a prepared
    member, or report one), and how many bytes it writes (for the batches)."""

    size: int
    apply: Callable[[Importer], None]


def _refusal(path: str, problem: Problem) -> Step:
    return Step(0, lambda importer: importer.refuse(path, problem))


class _Budget:
    """What the archive's files inflate to, in total: at most the bulk limit; and what their
    inflating adds to the memory the request holds, in its tenant's share of the bodies'
    (``held``: None for none)."""

    def __init__(self, limit: int, held: HeldBody | None) -> None:
        self.limit = limit
        self.held = held
        self.used = 0

    def _too_large(self) -> ContentTooLarge:
        return ContentTooLarge(
            f"The archive's files inflate to more than the limit of {self.limit} bytes "
            "(in total, .json.gz saves counted inflated); nothing was imported."
        )

    def inflate(self, content: bytes) -> bytes:
        """A ``.json.gz`` member inflated within what is left of the limit and of the share
        (a 429 when the share ends first), then held in the share."""
        left = self.limit - self.used
        most = left if self.held is None else min(left, self.held.most() - self.held.size)
        try:
            inflated = gzip_format.decompress(content, most)
        except gzip_format.DecompressedTooLarge as exc:
            if self.held is not None and most < left:
                raise self.held.refusal() from None
            raise self._too_large() from exc
        except gzip_format.GzipError as exc:
            raise MalformedBody(f"The gzip file cannot be decompressed: {exc}.") from exc
        self.count(len(inflated))
        if self.held is not None:
            self.held.up_to(self.held.size + len(inflated))
        return inflated

    def count(self, size: int) -> None:
        self.used += size
        if self.used > self.limit:
            raise self._too_large()


def _admit(entry: archive_format.Entry, limits: Limits, budget: _Budget) -> Member | Step | None:
    """The member to import (its content inflated when it is a ``.json.gz`` save); a step
    that reports why it is not; or None for a directory (part of any tar of a directory,
    passed over silently). Raises 413 when the archive's files inflate past the limit."""
    if entry.type is archive_format.EntryType.directory:
        return None
    path = archive_format.safe_name(entry.name)
    if path is None:
        return _refusal(
            entry.name,
            InvalidContent("An absolute path or one with '..' could reach outside the project."),
        )
    if entry.type is archive_format.EntryType.sparse:
        return _refusal(
            path,
            InvalidContent(
                "A sparse file (its holes not stored in the tar) is not imported: archive it whole."
            ),
        )
    if entry.type is not archive_format.EntryType.file:
        return _refusal(
            path, InvalidContent("Only regular files are imported, not links or devices.")
        )
    target = layout.classify(path)
    if target is None:
        return Step(0, lambda importer: importer.skip(path, "not a file of the layout"))
    limit = limits.save_bytes if target.kind is Kind.save else limits.member_bytes
    if entry.content is None or entry.size > limit:
        return _refusal(
            path, ContentTooLarge(f"The file exceeds its route's limit of {limit} bytes.")
        )
    content = entry.content
    if target.kind is Kind.save and is_gzip(content):
        try:
            content = budget.inflate(content)
        except MalformedBody as exc:
            return _refusal(path, exc)
    else:
        budget.count(len(content))
    return Member(path, target, content)


def _prepared(member: Member, limits: Limits) -> Step:
    """The member through its kind's prepare step; a failure is reported when its turn
    comes, as the route's own problem."""
    prepared: MemberWrite | Exception
    try:
        prepared = PREPARERS[member.target.kind](member, limits)
    except (Skip, FormatError, Problem) as exc:
        prepared = exc
    return Step(len(member.content), lambda importer: importer.run(member, prepared))


def prepare_import(tar: bytes, limits: Limits, held: HeldBody | None) -> list[Step]:
    """Phases 1 and 2, without the database: the archive's steps (of its tar, inflated), in
    the order they are written. An archive that cannot be read at all is a 400, one whose
    files inflate past the bulk limit in total a 413, one whose ``.json.gz`` saves inflate
    past what its tenant's share of the bodies' memory has left (``held``) a 429; all import
    nothing."""
    budget = _Budget(limits.save_bytes, held)
    admitted: list[Member | Step] = []
    for entry in archive_format.read(tar, limits.save_bytes):
        if (member := _admit(entry, limits, budget)) is not None:
            admitted.append(member)
    steps: list[Step] = []
    backups: list[Step] = []
    for item in admitted:
        if isinstance(item, Step):
            steps.append(item)
        elif item.target.kind is Kind.run_backup:
            # After every state.json, whatever the order of the tar: a backup belongs to a
            # run's state, and atari's own load of that state may replace it.
            backups.append(_prepared(item, limits))
        else:
            steps.append(_prepared(item, limits))
    return steps + backups


def _batches(steps: list[Step]) -> Iterator[list[Step]]:
    """The steps in order, cut into batches of at most ``BATCH_BYTES`` (or one step, when
    it alone is larger) and ``BATCH_MEMBERS``; always at least one batch."""
    batch: list[Step] = []
    size = 0
    for step in steps:
        if batch and (size + step.size > BATCH_BYTES or len(batch) == BATCH_MEMBERS):
            yield batch
            batch, size = [], 0
        batch.append(step)
        size += step.size
    yield batch


Finished = TypeVar("Finished")


def write_import(
    database: Database,
    tenant: str,
    project: str,
    steps: list[Step],
    finish: Callable[[Session, ArchiveReport], Finished],
) -> Finished:
    """Phase 3: the steps in batches, each committed before the next takes the writer.
    ``finish`` gets the complete report in the last batch's transaction (to record the
    Idempotency-Key's answer with the last writes). A batch that fails to commit (the
    database gone) ends the import with its error: the batches before it stay imported, and
    sending the archive again completes it (what is stored comes back ``unchanged``)."""
    importer = Importer(tenant, project)
    batches = list(_batches(steps))
    for number, batch in enumerate(batches, start=1):
        if number > 1:
            time.sleep(BATCH_PAUSE_SECONDS)
        with session_scope(database.write_session()) as session:
            importer.begin(session)
            for step in batch:
                step.apply(importer)
            if number == len(batches):
                return finish(session, importer.report())
    raise AssertionError("_batches always yields a batch")
