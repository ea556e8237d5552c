"""The rules for context saves: validation with defaults, redaction, retention, resume."""

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import INDEXED_CHARACTERS, utcnow
from app.core.documents import ANY_SIZE, Download, check_size
from app.core.errors import Conflict, NotFound
from app.formats import gzip as gzip_format
from app.formats import jsondoc, mdan_save
from app.formats.errors import MAX_LISTED, Notes, quoted
from app.projects.repository import ProjectRepository
from app.projects.service import project_id
from app.redaction import Redactions, redact_pointer, redact_value
from app.saves.models import Save
from app.saves.repository import Position, SaveFilter, SaveRepository
from app.saves.schemas import RedactedSite, SaveReceipt, SaveSummary, SaveWarning
from app.storage.writes import Write

# Seed 000: "For large saves (>1MB), consider using gzip compression".
COMPRESS_OVER_BYTES = 1024 * 1024
# ISA-L's level 2 (app/formats/gzip.py): a generated 1 MB save 5.4x smaller in 1.5 ms, where
# its level 3 takes twice as long for the same size and zlib-ng's level 2, used before, 3.7 ms;
# the import waits for it.
STORAGE_GZIP_LEVEL = 2


@dataclass(frozen=True)
class PreparedSave:
    """A save file checked, redacted and rendered: everything that needs no database."""

    filename: str
    document: dict[str, Any]
    warnings: Notes[mdan_save.FieldWarning]
    redactions: Redactions
    summary: mdan_save.Summary
    # The save's row's columns of its file (``_rendered``).
    file: dict[str, Any]


def _rendered(document: dict[str, Any]) -> tuple[mdan_save.Summary, dict[str, Any]]:
    """The save's summary and its file as its row keeps it: the bytes (gzip-compressed when
    over ``COMPRESS_OVER_BYTES``), their ETag (the file's own bytes') and every column read
    from it. Rendering, compressing and hashing are the slow part of a large save: done before
    a write takes its locks wherever the row is not needed first (an import)."""
    summary = mdan_save.summarize(document, INDEXED_CHARACTERS)
    content = mdan_save.render(document)
    gzipped = len(content) > COMPRESS_OVER_BYTES
    return summary, {
        "timestamp": summary.timestamp,
        "project_name": summary.project_name,
        "current_phase": summary.current_phase,
        "all_phases_complete": summary.all_phases_complete,
        "token_total": summary.token_total,
        "token_limit": summary.token_limit,
        "token_percentage": summary.token_percentage,
        "save_count": summary.save_count,
        "resume_count": summary.resume_count,
        "size_bytes": len(content),
        "etag": etag_of(content),
        "content": gzip_format.compress(content, STORAGE_GZIP_LEVEL) if gzipped else content,
        "content_gzipped": gzipped,
    }


def prepare_save(raw: bytes, filename: str | None = None) -> PreparedSave:
    """Parse with defaults and warnings, redact, render, compress and hash. Pure and slow on
    large files, so it runs before the request takes any database lock.

    ``filename`` is the name the file came with (``mdan-save-<seconds>.json``, checked by
    the caller); a save without one is named after its ``timestamp``. A missing timestamp
    takes the second the name gives, so that importing the same file twice gives the same
    save; without a name, the current time."""
    now = (mdan_save.saved_at(filename) if filename is not None else None) or utcnow()
    document, warnings = mdan_save.parse(raw, now)
    redactions = Redactions()
    # Every string and key, not a list of fields: a secret lands wherever a tool put it
    # (tool-call arguments, metadata, vendor fields).
    redaction.for_storage(document, redactions)
    summary, file = _rendered(document)
    name = filename if filename is not None else mdan_save.filename_for(summary.timestamp)
    return PreparedSave(name, document, warnings, redactions, summary, file)


def _file_bytes(save: Save) -> bytes:
    return gzip_format.decompress_stored(save.content) if save.content_gzipped else save.content


@dataclass(frozen=True)
class Stored:
    receipt: SaveReceipt
    etag: str


def store_save(write: Write, prepared: PreparedSave, *, auto_prune: bool) -> Stored:
    repository = SaveRepository(write.sessions)
    summary = prepared.summary
    number = ProjectRepository(write.session).next_save_number(write.project_id)
    save_id = repository.create(
        prepared.file
        | {
            "project_id": write.project_id,
            "number": number,
            "filename": prepared.filename,
            "stored_at": utcnow(),
        }
    )
    repository.add_phase_statuses(save_id, summary.phase_statuses)
    # Seed 000: "Delete old saves after successful completion".
    completed = auto_prune and summary.all_phases_complete
    pruned = _delete_before(write, (summary.timestamp, number)) if completed else 0
    sites = prepared.redactions.listing()
    receipt = SaveReceipt(
        id=number,
        filename=prepared.filename,
        timestamp=prepared.document["timestamp"],
        size_bytes=prepared.file["size_bytes"],
        warnings=[
            # A warning may quote a value or a key the client sent: never a secret in it.
            SaveWarning(path=redact_pointer(w.path), message=redact_value(w.message))
            for w in (*prepared.warnings, *prepared.summary.unlisted)
        ],
        warnings_truncated=prepared.warnings.more,
        redactions=prepared.redactions.by_kind(),
        redacted=[RedactedSite.model_validate(site) for site in sites[:MAX_LISTED]],
        redacted_truncated=len(sites) > MAX_LISTED,
        pruned=pruned,
    )
    return Stored(receipt=receipt, etag=prepared.file["etag"])


def stored_copy(write: Write, prepared: PreparedSave) -> int | None:
    """The number of a save of the project stored under the same name with the same file, as
    this one would be stored (after redaction, so a file holding a secret matches its stored
    copy): importing it again would add nothing."""
    return SaveRepository(write.sessions).find_file(
        write.project_id, prepared.filename, prepared.file["etag"]
    )


def _not_found(number: int) -> NotFound:
    return NotFound(f"No save {number!r} in this project.")


def _download(found: tuple[Save, int], up_to: int) -> Download:
    save, size = found
    check_size(save.etag, size, up_to)
    return Download(
        filename=save.filename, etag=save.etag, content=save.content, gzipped=save.content_gzipped
    )


def get_file(
    session: Session, tenant: str, project: str, number: int, up_to: int = ANY_SIZE
) -> Download:
    """The project's save of this number (the id the API shows); ``Oversized``, and none of
    it read, when the file is over ``up_to`` bytes."""
    pid = project_id(session, tenant, project)
    found = SaveRepository(session).get_within(pid, number, document="content", up_to=up_to)
    if found is None:
        raise _not_found(number)
    return _download(found, up_to)


def latest_file(session: Session, tenant: str, project: str, up_to: int = ANY_SIZE) -> Download:
    """As ``get_file``, for the newest save."""
    found = SaveRepository(session).latest_within(project_id(session, tenant, project), up_to)
    if found is None:
        raise NotFound(f"Project {project!r} has no saves.")
    return _download(found, up_to)


def list_saves(
    session: Session, tenant: str, project: str, where: SaveFilter, cursor: str | None, limit: int
) -> tuple[list[SaveSummary], str | None]:
    pid = project_id(session, tenant, project)
    saves, next_cursor = SaveRepository(session).page(pid, where, cursor, limit)
    return [_summary(save) for save in saves], next_cursor


def _summary(save: Save) -> SaveSummary:
    # The API's id of a save is its number in the project.
    columns = save.model_dump(include=set(SaveSummary.model_fields) - {"id"})
    return SaveSummary.model_validate(columns | {"id": save.number})


@dataclass(frozen=True)
class Resumed:
    save_id: int
    resume_phase: str
    resume_count: int
    etag: str
    document: dict[str, Any]


@dataclass(frozen=True)
class PreparedResume:
    """A resume worked out before its write: from the save as it was read (``read_etag``), its
    document with the resume counted and the columns that store it."""

    read_etag: str
    document: dict[str, Any]
    columns: dict[str, Any]


def _resumed(content: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """Seed 000's resume of a save file: the version checked, the resume counted; the document
    and the columns that store it."""
    document = jsondoc.load(content)
    if document.get("version") != mdan_save.VERSION:
        raise Conflict(
            f"Save version {quoted(document.get('version'))} cannot be resumed by a "
            f"{mdan_save.VERSION!r} reader."
        )
    # As seed 000's load_context does: Python's int has no largest value.
    document["metadata"]["resume_count"] += 1
    return document, _rendered(document)[1]


def prepare_resume(
    session: Session, tenant: str, project: str, number: int, up_to: int
) -> PreparedResume | None:
    """The slow part of a resume (parse, render, compress, hash: seconds for a 30 MB save, which
    held SQLite's one writer as long), before the write. None where there is nothing to
    prepare (no such save, a version no reader resumes): the write finds it and answers so.
    ``Oversized``, nothing read, for a save over ``up_to`` bytes (the resume answers it whole)."""
    try:
        found = get_file(session, tenant, project, number, up_to)
        content = gzip_format.decompress_stored(found.content) if found.gzipped else found.content
        document, columns = _resumed(content)
    except (NotFound, Conflict):
        return None
    return PreparedResume(found.etag, document, columns)


def resume(
    write: Write, number: int, precondition: Precondition, prepared: PreparedResume | None
) -> Resumed:
    """Seed 000's resume process: check the version, count the resume, name the phase. With
    the resume ``prepared`` from the save as the write finds it, only its store; else (none,
    or the save changed since it was read) all of it, in the write."""
    repository = SaveRepository(write.sessions)
    save = write.existing(repository, number, missing=_not_found(number), precondition=precondition)
    if prepared is not None and prepared.read_etag == save.etag:
        document, columns = prepared.document, prepared.columns
    else:
        document, columns = _resumed(_file_bytes(save))
    repository.store(save, columns)
    return Resumed(
        save_id=save.number,
        resume_phase=document["phases"]["current"],
        resume_count=document["metadata"]["resume_count"],
        etag=save.etag,
        document=document,
    )


def resume_answer(values: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """A resume's answer: the save's id, the phase and count of ``values`` (a ``Resumed``'s,
    or the reference its answer was remembered by), and the save."""
    return {
        "id": values["id"],
        "resume_phase": values["resume_phase"],
        "resume_count": values["resume_count"],
        "save": document,
    }


def save_as_resumed(
    session: Session, tenant: str, project: str, number: int, etag: str
) -> dict[str, Any] | None:
    """The save as a resume left it (``etag``, the version it answered), to rebuild that
    answer; None once the save has changed since, or is gone."""
    try:
        found = get_file(session, tenant, project, number)
    except NotFound:
        return None
    if found.etag != etag:
        return None
    content = gzip_format.decompress_stored(found.content) if found.gzipped else found.content
    document: dict[str, Any] = jsondoc.load(content)
    return document


def delete_save(write: Write, number: int, precondition: Precondition) -> None:
    repository = SaveRepository(write.sessions)
    repository.delete(
        write.existing(repository, number, missing=_not_found(number), precondition=precondition)
    )


def _delete_before(write: Write, position: Position | None) -> int:
    """Retention, automatic or asked for: the project's saves before ``position`` go (all of
    them for None). The write holds the project's lock, as every write takes it first."""
    return SaveRepository(write.sessions).delete_before(write.project_id, position)


def prune(write: Write, keep_latest: int) -> int:
    """Keep the ``keep_latest`` newest saves: those before the oldest of them go."""
    if keep_latest == 0:
        return _delete_before(write, None)
    oldest_kept = SaveRepository(write.sessions).position_of_newest(write.project_id, keep_latest)
    return 0 if oldest_kept is None else _delete_before(write, oldest_kept)
