"""The project archive: every file of a project in the tools' on-disk layout, out and in.

Export reads the table of contents first, then each document through its own domain's
service, one at a time, so the archive's members are byte for byte what each export route
answers; the archive is written whole (to a spool) before it is sent. Import hands each
member to the same service function as its own import route, each in a savepoint of its own:
a bad member is reported with the problem its route would have answered and never undoes or
stops the others.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from app.agents import service as agents
from app.agents.repository import MemoryRepository as AgentMemoryRepository
from app.archive import layout
from app.archive.layout import Kind, Target
from app.archive.repository import ArchiveRepository
from app.archive.schemas import (
    ArchiveReport,
    ImportedMember,
    MemberWarning,
    RefusedMember,
    SkippedMember,
)
from app.core.body import decompress_body
from app.core.conditional import etag_of
from app.core.errors import (
    Conflict,
    ContentTooLarge,
    FieldError,
    InvalidContent,
    MalformedBody,
    NotFound,
    Problem,
)
from app.core.identifiers import IDENTIFIER_PATTERN, IDENTIFIER_RULE
from app.features import service as features
from app.features.schemas import FeatureSummary, WorkflowSummary
from app.formats import agent_memory, mdan_save
from app.formats import archive as archive_format
from app.formats.agent_memory import NDJSON_MEDIA_TYPE, MemoryKind
from app.formats.errors import FormatError, MalformedDocument
from app.formats.gzip import is_gzip
from app.formats.project_memory import ItemKind
from app.memory import service as memory
from app.memory.schemas import FileReceipt
from app.projects.repository import ProjectRepository
from app.projects.service import project_id
from app.runs import service as runs
from app.saves import service as saves
from app.saves.service import COMPRESS_OVER_BYTES

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
    read: Callable[[Session], bytes]


def consistent_reads(session: Session) -> None:
    """Every read of ``session`` sees one snapshot. SQLite's WAL read transactions already
    do; PostgreSQL's default READ COMMITTED would show each statement the latest commits."""
    if session.get_bind().dialect.name == "postgresql":
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def plan_export(session: Session, tenant: str, project: str) -> list[PlannedMember]:
    """The archive's members in order (404 for a project the tenant does not have)."""
    contents = ArchiveRepository(session, project_id(session, tenant, project))
    planned: dict[str, PlannedMember] = {}

    def add(path: str, moment: datetime | None, read: Callable[[Session], bytes]) -> None:
        planned[path] = PlannedMember(path, _mtime(moment), read)

    for save_id, filename, gzipped, stored_at in contents.saves():
        # Two saves of the same second share a file name: the later one wins, as on disk.
        add(
            layout.save_path(filename + (".gz" if gzipped else "")),
            stored_at,
            lambda s, i=save_id: saves.get_file(s, tenant, project, i).content,
        )
    for agent, updated_at in contents.snapshots():
        add(
            layout.snapshot_path(agent),
            updated_at,
            lambda s, a=agent: agents.get_snapshot(s, tenant, project, a).content,
        )
    for agent, kind_name, appended_at in contents.agent_memory_files():
        kind = MemoryKind(kind_name)
        add(
            layout.agent_memory_path(agent, kind),
            appended_at,
            lambda s, a=agent, k=kind: agents.memory_file(s, tenant, project, a, k).content,
        )
    for run, has_backup, modified_at in contents.runs():
        add(
            layout.state_path(run),
            modified_at,
            lambda s, r=run: runs.get_file(s, tenant, project, r).content,
        )
        if has_backup:
            add(
                layout.backup_path(run),
                modified_at,
                lambda s, r=run: runs.get_backup(s, tenant, project, r).content,
            )
    for feature, updated_at in contents.features():
        add(
            layout.context_path(feature),
            updated_at,
            lambda s, f=feature: features.get(s, tenant, project, f).content,
        )
    for feature, updated_at in contents.workflows():
        add(
            layout.workflow_path(feature),
            updated_at,
            lambda s, f=feature: features.get_workflow(s, tenant, project, f).content,
        )
    if (summary_at := contents.summary_time()) is not None:
        add(
            layout.memory_file_path(_SUMMARY_FILE),
            summary_at,
            lambda s: memory.summary_file(s, tenant, project, None).content,
        )
    written = contents.memory_file_kinds()
    for name, item_kind in _ITEM_FILE_KINDS.items():
        if item_kind.value in written:
            add(
                layout.memory_file_path(name),
                written[item_kind.value],
                lambda s, k=item_kind: memory.items_file(s, tenant, project, k, None).content,
            )
    return list(planned.values())


def write_archive(session: Session, tenant: str, project: str, level: int, out: BinaryIO) -> None:
    """Write the project's .tar.gz into ``out``, every member read from one snapshot (404 for
    a project the tenant does not have). Reads the whole archive before a byte is sent, so
    that the caller can give the session's connection back before the client reads."""
    consistent_reads(session)
    writer = archive_format.ArchiveWriter(level)
    for member in plan_export(session, tenant, project):
        out.write(writer.add(member.path, member.read(session), member.mtime))
        # The member's rows: the session would otherwise keep every document it has read
        # until it closes, the whole project in memory.
        session.expunge_all()
    out.write(writer.finish())


# Import.


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


def _format_problem(exc: FormatError) -> Problem:
    # As the app's own handler renders codec errors: malformed 400, invalid 422.
    problem_class = MalformedBody if isinstance(exc, MalformedDocument) else InvalidContent
    return problem_class(exc.message, errors=[FieldError(p, m) for p, m in exc.errors])


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
    def __init__(
        self, session: Session, tenant: str, project: str, limits: Limits, report: ArchiveReport
    ) -> None:
        self.session = session
        self.tenant = tenant
        self.project = project
        self.limits = limits
        self.report = report
        self.reset_runs: set[str] = set()
        self.stored = _stored_files(session, tenant, project)

    def _refuse(self, path: str, problem: Problem) -> None:
        body = problem.body()
        self.report.refused.append(
            RefusedMember(
                path=path,
                type=body["type"],
                title=body["title"],
                status=body["status"],
                detail=body["detail"],
                errors=body.get("errors", []),
            )
        )

    def admit(self, entry: archive_format.Entry) -> Member | None:
        """The member to import, or None after reporting why it is not (directories are
        part of any tar of a directory and are passed over silently)."""
        if entry.type is archive_format.EntryType.directory:
            return None
        path = archive_format.safe_name(entry.name)
        if path is None:
            self._refuse(
                entry.name,
                InvalidContent(
                    "An absolute path or one with '..' could reach outside the project."
                ),
            )
            return None
        if entry.type is not archive_format.EntryType.file:
            self._refuse(
                path, InvalidContent("Only regular files are imported, not links or devices.")
            )
            return None
        target = layout.classify(path)
        if target is None:
            self.report.skipped.append(SkippedMember(path=path, reason="not a file of the layout"))
            return None
        limit = self.limits.save_bytes if target.kind is Kind.save else self.limits.member_bytes
        if entry.content is None or entry.size > limit:
            self._refuse(
                path, ContentTooLarge(f"The file exceeds its route's limit of {limit} bytes.")
            )
            return None
        return Member(path, target, entry.content)

    def _import(self, member: Member) -> Outcome:
        """The member through its kind's handler, in a savepoint. A file that replaces what
        it names and leaves the project's copy byte for byte as it was (the same file, or one
        that stores as the same: a redacted secret, a version 1 state migrated again) is
        ``unchanged``: its savepoint is rolled back, so no time moves and pushing twice
        changes nothing. Saves and agent memory recognise what they hold in their handlers."""
        stored = self.stored.get(member.path) if member.target.kind in _REPLACING_KINDS else None
        before = stored.read(self.session) if stored is not None else None
        try:
            with self.session.begin_nested():
                outcome = HANDLERS[member.target.kind](self, member)
                if stored is not None and stored.read(self.session) == before:
                    raise _Unchanged
        except _Unchanged:
            assert before is not None
            return Outcome(200, "unchanged", {"etag": etag_of(before)})
        return outcome

    def run(self, member: Member) -> None:
        try:
            outcome = self._import(member)
        except Skip as exc:
            self.report.skipped.append(SkippedMember(path=member.path, reason=str(exc)))
        except Problem as exc:
            self._refuse(member.path, exc)
        except FormatError as exc:
            self._refuse(member.path, _format_problem(exc))
        except IntegrityError:
            self._refuse(
                member.path, Conflict("The change conflicts with a concurrent change; retry it.")
            )
        else:
            self.report.imported.append(
                ImportedMember(
                    path=member.path,
                    kind=member.target.kind,
                    status=outcome.status,
                    action=outcome.action,
                    result=outcome.result,
                )
            )
            self.report.warnings.extend(
                MemberWarning(path=member.path, pointer=pointer, message=message)
                for pointer, message in outcome.warnings
            )

    def _project_id(self) -> int | None:
        project = ProjectRepository(self.session).get(self.tenant, self.project)
        return project.id if project is not None else None

    # One handler per kind of file: the member's own route's service function.

    def save(self, member: Member) -> Outcome:
        """The save under the name it came with (``.gz`` aside). Pushing a directory again
        adds nothing: a save already stored under that name with that file, as it would be
        stored (redacted), is ``unchanged``."""
        filename = member.target.name.removesuffix(".gz")
        if not mdan_save.is_filename(filename):
            raise InvalidContent(
                f"{member.target.name!r} is not the name of a save file.",
                errors=[FieldError("path.filename", f"must be {mdan_save.FILENAME_RULE}")],
            )
        raw = member.content
        if is_gzip(raw):
            raw = decompress_body(raw, self.limits.save_bytes)
        prepared = saves.prepare_save(raw, filename)
        existing = saves.stored_copy(self.session, self.tenant, self.project, prepared)
        if existing is not None:
            return Outcome(200, "unchanged", {"id": existing})
        # No automatic pruning: an archive restores a project's saves, it does not retire them.
        receipt = saves.store_save(
            self.session, self.tenant, self.project, prepared, auto_prune=False
        ).receipt
        warnings = [(warning.path, warning.message) for warning in receipt.warnings]
        warnings += [
            ("", f"{count} secret(s) of kind {kind} redacted")
            for kind, count in receipt.redactions.items()
        ]
        exported_as = receipt.filename + (".gz" if receipt.size_bytes > COMPRESS_OVER_BYTES else "")
        if layout.save_path(exported_as) != member.path:
            warnings.append(("", f"exported as {layout.save_path(exported_as)}"))
        return Outcome(201, "created", receipt.model_dump(mode="json"), warnings)

    def snapshot(self, member: Member) -> Outcome:
        agent = _checked_name(member.target, "agent")
        stored = agents.put_snapshot(
            self.session, self.tenant, self.project, agent, member.content, _no_precondition
        )
        action = "created" if stored.created else "replaced"
        return Outcome(201 if stored.created else 200, action, stored.receipt.model_dump())

    def agent_memory(self, member: Member) -> Outcome:
        """The file on disk is the whole history: only the lines the store lacks are
        appended, so that pushing a directory twice appends nothing the second time. A
        raw_traces.jsonl that autobyteus pruned since (whole turns gone, moved to its
        raw_traces_archive.jsonl) prunes the same turns here first."""
        agent = _checked_name(member.target, "agent")
        kind = member.target.memory_kind
        assert kind is not None
        if not member.content.strip():
            raise Skip("empty: no items to append")
        lines = [
            agent_memory.render_line(item)
            for item in agent_memory.parse(member.content, NDJSON_MEDIA_TYPE, kind)
        ]
        pid = self._project_id()
        stored = (
            [row.line for row in AgentMemoryRepository(self.session, pid, agent, kind).all()]
            if pid is not None
            else []
        )
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
            pruned = agents.prune_raw_traces(self.session, self.tenant, self.project, agent, turns)
            warnings.append(
                ("", f"{pruned} raw trace(s) of {len(turns)} turn(s) pruned, as in the file")
            )
        new = lines[len(stored) - pruned :]
        appended = (
            agents.append_memory(
                self.session,
                self.tenant,
                self.project,
                agent,
                kind,
                agent_memory.render_file(new),
                NDJSON_MEDIA_TYPE,
            )
            if new
            else 0
        )
        status = 201 if appended else 200
        if pruned:
            return Outcome(status, "pruned", {"pruned": pruned, "appended": appended}, warnings)
        return Outcome(status, "appended" if appended else "unchanged", {"appended": appended})

    def run_state(self, member: Member) -> Outcome:
        """atari's own load (``state:load``): a file from disk may be of version 1, or one
        atari itself would set aside; the outcome says which."""
        run = _checked_name(member.target, "run")
        loaded = runs.load_state(self.session, self.tenant, self.project, run, member.content)
        warnings = [(notice.path, notice.message) for notice in loaded.notices]
        if loaded.outcome != "stored":
            warnings.append(("", f"{loaded.outcome}: {loaded.reason}"))
        if loaded.outcome == "reset":
            self.reset_runs.add(run)
        return Outcome(200, loaded.outcome, loaded.model_dump(mode="json"), warnings)

    def run_backup(self, member: Member) -> Outcome:
        run = _checked_name(member.target, "run")
        if run in self.reset_runs:
            raise Skip(
                "superseded: loading this archive's state.json set that file aside as the "
                "backup, as atari does"
            )
        summary = runs.put_backup(self.session, self.tenant, self.project, run, member.content)
        return Outcome(200, "replaced", summary.model_dump(mode="json"))

    def feature_context(self, member: Member) -> Outcome:
        feature = _checked_name(member.target, "feature")
        context, created = features.put(
            self.session, self.tenant, self.project, feature, member.content, _no_precondition
        )
        summary = FeatureSummary.model_validate(context, from_attributes=True)
        action = "created" if created else "replaced"
        return Outcome(201 if created else 200, action, summary.model_dump(mode="json"))

    def feature_workflow(self, member: Member) -> Outcome:
        feature = _checked_name(member.target, "feature")
        workflow, action = features.put_workflow(
            self.session, self.tenant, self.project, feature, member.content, _no_precondition
        )
        summary = WorkflowSummary.model_validate(workflow, from_attributes=True)
        return Outcome(201 if action == "created" else 200, action, summary.model_dump(mode="json"))

    def memory_file(self, member: Member) -> Outcome:
        name = member.target.name
        if name == _SUMMARY_FILE:
            receipt = memory.put_summary(
                self.session,
                self.tenant,
                self.project,
                member.content,
                _no_precondition,
                self.limits.summary_tokens,
                memory.OverLimit.warn,
            )
            warnings = [
                (pointer, "missing; filled in by the service") for pointer in receipt.filled
            ]
            warnings += [(warning.pointer, warning.message) for warning in receipt.warnings]
            action = "created" if receipt.created else "replaced"
            status = 201 if receipt.created else 200
            return Outcome(status, action, receipt.model_dump(mode="json"), warnings)
        kind: ItemKind = _ITEM_FILE_KINDS[name]
        etag, style, count = memory.put_items_file(
            self.session, self.tenant, self.project, kind, member.content, _no_precondition
        )
        receipt_body = FileReceipt(etag=etag, style=style, items=count).model_dump(mode="json")
        return Outcome(200, "replaced", receipt_body)


HANDLERS: dict[Kind, Callable[[Importer, Member], Outcome]] = {
    Kind.save: Importer.save,
    Kind.snapshot: Importer.snapshot,
    Kind.agent_memory: Importer.agent_memory,
    Kind.run_state: Importer.run_state,
    Kind.run_backup: Importer.run_backup,
    Kind.feature_context: Importer.feature_context,
    Kind.feature_workflow: Importer.feature_workflow,
    Kind.memory_file: Importer.memory_file,
}


def import_archive(
    session: Session, tenant: str, project: str, raw: bytes, limits: Limits
) -> ArchiveReport:
    """Import a .tar.gz (or a tar whose gzip the transport already undid). An archive that
    cannot be read at all is a 400 and imports nothing."""
    tar_bytes = decompress_body(raw, limits.save_bytes) if is_gzip(raw) else raw
    report = ArchiveReport()
    importer = Importer(session, tenant, project, limits, report)
    backups: list[Member] = []
    for entry in archive_format.read(tar_bytes, limits.save_bytes):
        member = importer.admit(entry)
        if member is None:
            continue
        if member.target.kind is Kind.run_backup:
            # After every state.json, whatever the order of the tar: a backup belongs to a
            # run's state, and atari's own load of that state may replace it.
            backups.append(member)
        else:
            importer.run(member)
    for member in backups:
        importer.run(member)
    return report
