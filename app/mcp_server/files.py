"""The exported files as MCP resources: ``context-store://{project}/{path}``, where ``path`` is
the file's place in the project's layout (``app/archive/layout.py``, which the archive export
and ``push``/``pull`` share) and its contents are what the file's own export route answers.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.agents.schemas import MemoryFile
from app.archive import layout
from app.client import AsyncContextStoreClient, Document
from app.core.constraints import MAX_LIMIT
from app.formats.agent_memory import FILENAMES, NDJSON_MEDIA_TYPE, MemoryKind

SCHEME = "context-store"
# Files of a project a resources/list page holds at most.
PAGE_SIZE = MAX_LIMIT
JSON = "application/json"

Export = Callable[[AsyncContextStoreClient, str, layout.Target], Awaitable[Document]]


async def _save(store: AsyncContextStoreClient, project: str, target: layout.Target) -> Document:
    """A save by its file name (the routes address saves by id, the layout by name): the newest
    of that name, as the archive keeps it. The archive's ``.json.gz`` of a large save is the
    same file."""
    named = await store.list_saves(project, filename=target.name.removesuffix(".gz"), limit=1)
    if not named.items:
        raise LookupError(f"{project} has no save {target.name}")
    return await store.export_save(project, named.items[0].id)


def _memory_file(kind: MemoryKind | None) -> MemoryFile:
    return next(memory for memory in MemoryFile if memory.kind is kind)


# Each kind of file, by the export route that answers it.
EXPORTS: dict[layout.Kind, Export] = {
    layout.Kind.save: _save,
    layout.Kind.snapshot: lambda store, project, target: store.get_snapshot(project, target.name),
    layout.Kind.agent_memory: lambda store, project, target: store.export_memory(
        project, target.name, _memory_file(target.memory_kind)
    ),
    layout.Kind.run_state: lambda store, project, target: store.export_state(project, target.name),
    layout.Kind.run_backup: lambda store, project, target: store.export_backup(
        project, target.name
    ),
    layout.Kind.feature_context: lambda store, project, target: store.export_context(
        project, target.name
    ),
    layout.Kind.feature_workflow: lambda store, project, target: store.export_workflow(
        project, target.name
    ),
    layout.Kind.memory_file: lambda store, project, target: store.export_memory_file(
        project,
        f"{target.name}.json",  # type: ignore[arg-type]  # classify() matched one of the four
    ),
}


def uri(project: str, path: str) -> str:
    return f"{SCHEME}://{project}/{path}"


def media_type(path: str) -> str:
    if path.endswith(".jsonl"):
        return NDJSON_MEDIA_TYPE
    if path.endswith(".json"):
        return JSON
    return "application/octet-stream"  # a run's backup: whatever atari set aside


async def read(store: AsyncContextStoreClient, project: str, path: str) -> bytes:
    """The file at ``path``, exactly as its export route answers it."""
    target = layout.classify(path)
    if target is None:
        raise LookupError(f"No file of the layout is at {path!r}")
    document = await EXPORTS[target.kind](store, project, target)
    return document.content


async def paths(
    store: AsyncContextStoreClient, project: str, cursor: str | None
) -> tuple[list[str], str | None]:
    """A page of the project's files by path, and the cursor of the next: the archive's
    members, listed without building the archive."""
    page = await store.list_archive_members(project, cursor=cursor, limit=PAGE_SIZE)
    return [_resource_path(member.path) for member in page.items], page.next_cursor


def _resource_path(member: str) -> str:
    """The archive keeps a large save gzipped (``.json.gz``), as MDAN-AUTO may; its resource is
    the save's JSON, as its route answers a client that does not take gzip."""
    target = layout.classify(member)
    if target is not None and target.kind is layout.Kind.save:
        return member.removesuffix(".gz")
    return member


@dataclass(frozen=True)
class Template:
    """A kind of file as a URI template, its variables named as the layout's."""

    uri_template: str
    name: str
    description: str
    variables: tuple[str, ...]

    @property
    def path(self) -> str:
        return self.uri_template.removeprefix(f"{SCHEME}://{{project}}/")


def _template(path: str, name: str, description: str, *variables: str) -> Template:
    return Template(uri("{project}", path), name, description, ("project", *variables))


# The layout's own path functions, given the variables' names: one source for the paths.
TEMPLATES = [
    _template(layout.save_path("{save}.json"), "mdan-save", "An MDAN-AUTO save.", "save"),
    _template(
        layout.snapshot_path("{agent}"),
        "working-context-snapshot",
        "An autobyteus agent's working-context snapshot.",
        "agent",
    ),
    *(
        _template(
            layout.agent_memory_path("{agent}", kind),
            f"agent-memory-{kind.value}",
            f"An autobyteus agent's {FILENAMES[kind]} (JSONL).",
            "agent",
        )
        for kind in MemoryKind
    ),
    _template(layout.state_path(layout.DEFAULT_RUN), "atari-state", "The atari run state."),
    _template(
        layout.backup_path(layout.DEFAULT_RUN),
        "atari-state-backup",
        "Its backup, as atari wrote it.",
    ),
    _template(layout.state_path("{run}"), "atari-run-state", "A named run's state.", "run"),
    _template(
        layout.backup_path("{run}"), "atari-run-state-backup", "A named run's backup.", "run"
    ),
    _template(
        layout.context_path("{feature}"),
        "feature-context",
        "An sdd-unified feature context.",
        "feature",
    ),
    _template(
        layout.workflow_path("{feature}"),
        "feature-workflow",
        "An sdd-unified feature workflow.",
        "feature",
    ),
    *(
        _template(
            layout.memory_file_path(name),
            name,
            f"Context Agent's {name}.json for the project.",
        )
        for name in layout.MEMORY_FILES
    ),
]
