"""The tools: each one call of a client route (``app.client.routes``), described for a model.

A tool holds no rule of its own: the route it calls validates, authorises, applies the domain's
rule and answers; the tool only names the call's arguments and hands back its answer as
structured content (the route's own response model as ``outputSchema``). A problem answer
becomes a tool error carrying its title and detail (``app.mcp_server.errors``).
"""

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app.agents.schemas import AppendReceipt, MemoryFile, RestoreResult, SnapshotReceipt
from app.client import AsyncContextStoreClient, Document
from app.core.constraints import IDENTIFIER_PATTERN, IDENTIFIER_RULE, MAX_LIST_ITEMS
from app.core.schemas import Page
from app.features.schemas import BreakerChange, HandoverAppended, HandoverItem
from app.formats import jsondoc
from app.formats.feature_context import ReviewOutcome
from app.mcp_server.errors import answering
from app.memory.schemas import ContextPack, ItemCreated, MemoryItemPublic, SummaryReceipt
from app.projects.schemas import ProjectPublic
from app.runs.schemas import IterationResult
from app.saves.schemas import ResumeResult, SaveReceipt, SaveSummary

P = ParamSpec("P")
T = TypeVar("T")

READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
REPLACES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Where ``_tool`` keeps a tool's annotations, on the method itself.
_ANNOTATIONS = "_tool_annotations"


# The path's own pattern, declared in the schema: a name is a path segment of the route it calls.
Name = Annotated[str, Field(pattern=IDENTIFIER_PATTERN, description=IDENTIFIER_RULE)]
Project = Annotated[
    str, Field(pattern=IDENTIFIER_PATTERN, description=f"The project's name: {IDENTIFIER_RULE}.")
]
IdempotencyKey = Annotated[
    str | None,
    Field(
        description="Optional. Send the same key when retrying this call after a failure to "
        "reach the store: the first answer is replayed and nothing is written twice."
    ),
]
Cursor = Annotated[str | None, Field(description="`next_cursor` of the previous page.")]
Limit = Annotated[
    int | None,
    Field(
        description="The most items a page holds (1 to 500; default 50); a page of large items "
        "holds fewer while more follow: page on until `next_cursor` is null."
    ),
]
ItemKind = Literal["decisions", "failures", "constraints"]
Strings = Annotated[list[str], Field(max_length=MAX_LIST_ITEMS)]


class StoredFile(BaseModel):
    """A file exactly as its tool wrote it; also the text content of the answer."""

    filename: str | None = Field(description="The file's name, when the store gives one.")
    etag: str | None = Field(description="Its ETag: the version this read returned.")
    document: Any = Field(description="The file's JSON document.")


def _tool(
    annotations: ToolAnnotations,
) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Makes a method a tool, with what it does to the store: ``StoreTools.all`` lists the
    methods so marked. A problem answer becomes a tool error carrying its title and detail."""

    def tool(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        @functools.wraps(method)
        async def call(*args: P.args, **kwargs: P.kwargs) -> T:
            with answering(ToolError, ToolError):
                return await method(*args, **kwargs)

        setattr(call, _ANNOTATIONS, annotations)
        return call

    return tool


# A tool's document is made into its file, and a file read into its result, in a worker thread:
# on the event loop they held up every other request, Python's indenting encoder 480 ms for a
# 48 MB save. What runs in C there (the parse, pydantic's copy) still holds the interpreter's
# lock while it runs, one call at a time (about 100 ms each for such a save on a quiet
# machine), and the loop runs between them.


def _file_result(document: Document) -> CallToolResult:
    text = document.content.decode()
    structured = StoredFile(
        filename=document.filename, etag=document.etag, document=json.loads(text)
    )
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json"),
    )


async def _file(document: Document) -> CallToolResult:
    return await run_in_threadpool(_file_result, document)


async def _written(document: dict[str, Any]) -> bytes:
    """The document as the Python tools write it: ``json.dumps(document, indent=2)``'s bytes."""
    return await run_in_threadpool(jsondoc.dumps_indent2, document)


FileResult = Annotated[CallToolResult, StoredFile]


class StoreTools:
    """The tools, bound to where their calls go."""

    def __init__(self, store: AsyncContextStoreClient) -> None:
        self.store = store

    # Projects.

    @_tool(READS)
    async def list_projects(
        self, cursor: Cursor = None, limit: Limit = None
    ) -> Page[ProjectPublic]:
        """List the projects this key can see, newest first, with how many saves, snapshots,
        runs, features and memory items each holds. Call it first to find the project name
        every other tool takes."""
        return await self.store.list_projects(cursor=cursor, limit=limit)

    # MDAN-AUTO saves.

    @_tool(WRITES)
    async def save_mdan_save(
        self,
        project: Project,
        save: Annotated[
            dict[str, Any],
            Field(description="The MDAN-AUTO save document (version, mode, phases, context, ...)."),
        ],
        filename: Annotated[
            str | None, Field(description="Its file name, mdan-save-<seconds>.json (optional).")
        ] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> SaveReceipt:
        """Store an MDAN-AUTO context save, before the context window fills or at a phase end,
        so that a later session can resume from it. Secrets in it are redacted."""
        content = await _written(save)
        return await self.store.import_save(
            project, content, filename=filename, idempotency_key=idempotency_key
        )

    @_tool(READS)
    async def latest_mdan_save(self, project: Project) -> FileResult:
        """The project's newest MDAN-AUTO save, exactly as stored: read it to resume work where
        the last session stopped."""
        return await _file(await self.store.latest_save(project))

    @_tool(READS)
    async def list_mdan_saves(
        self,
        project: Project,
        phase: Annotated[str | None, Field(description="Only saves in this phase.")] = None,
        cursor: Cursor = None,
        limit: Limit = None,
    ) -> Page[SaveSummary]:
        """The project's MDAN-AUTO saves, newest first: ids, timestamps and phases."""
        return await self.store.list_saves(project, phase=phase, cursor=cursor, limit=limit)

    @_tool(WRITES)
    async def resume_mdan_save(
        self,
        project: Project,
        save_id: Annotated[int, Field(description="The save's id (from list_mdan_saves).")],
        idempotency_key: IdempotencyKey = None,
    ) -> ResumeResult:
        """Resume from a save: counts the resume in the save and returns the phase to continue
        with and the save itself."""
        return await self.store.resume_save(project, save_id, idempotency_key=idempotency_key)

    # Working context snapshots and agent memory (autobyteus).

    @_tool(REPLACES)
    async def put_working_context_snapshot(
        self,
        project: Project,
        agent: Name,
        snapshot: Annotated[
            dict[str, Any],
            Field(
                description="The working_context_snapshot.json document; its agent_id is the agent."
            ),
        ],
    ) -> SnapshotReceipt:
        """Replace the agent's working-context snapshot (the cache restore reads first)."""
        content = await _written(snapshot)
        return await self.store.put_snapshot(project, agent, content)

    @_tool(READS)
    async def get_working_context_snapshot(self, project: Project, agent: Name) -> FileResult:
        """The agent's working-context snapshot, exactly as stored."""
        return await _file(await self.store.get_snapshot(project, agent))

    @_tool(WRITES)
    async def append_agent_memory(
        self,
        project: Project,
        agent: Name,
        memory: Annotated[MemoryFile, Field(description="Which memory file to append to.")],
        items: Annotated[
            list[dict[str, Any]],
            Field(
                description="The items, in order, as autobyteus writes them (one a line).",
                max_length=MAX_LIST_ITEMS,
            ),
        ],
        idempotency_key: IdempotencyKey = None,
    ) -> AppendReceipt:
        """Append items to one of the agent's memory files: raw traces of turns, episodic
        summaries or semantic facts."""
        return await self.store.append_memory(
            project, agent, memory, items, idempotency_key=idempotency_key
        )

    @_tool(WRITES)
    async def restore_agent_context(
        self,
        project: Project,
        agent: Name,
        system_prompt: Annotated[str, Field(description="The agent's system prompt.")],
        max_episodic: Annotated[int, Field(description="Most recent episodic items.")] = 3,
        max_semantic: Annotated[int, Field(description="Most recent semantic items.")] = 20,
        raw_tail_turns: Annotated[int, Field(description="Most recent raw turns.")] = 4,
        idempotency_key: IdempotencyKey = None,
    ) -> RestoreResult:
        """Restore the agent's working context after a restart: the stored snapshot when it is
        current (cache), else one rebuilt from its memory; `source` says which and why."""
        return await self.store.restore(
            project,
            agent,
            system_prompt,
            max_episodic=max_episodic,
            max_semantic=max_semantic,
            raw_tail_turns=raw_tail_turns,
            idempotency_key=idempotency_key,
        )

    # Run state (atari).

    @_tool(WRITES)
    async def start_iteration(
        self,
        project: Project,
        run: Name,
        bead_id: Annotated[str, Field(description="The task (bead) this iteration works on.")],
        attempt: Annotated[int | None, Field(description="Default: the last one + 1.")] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> IterationResult:
        """Record that an iteration of the run starts on a task (run `default` is the
        project's .atari/state.json)."""
        return await self.store.start_iteration(
            project, run, bead_id, attempt=attempt, idempotency_key=idempotency_key
        )

    @_tool(WRITES)
    async def end_iteration(
        self,
        project: Project,
        run: Name,
        bead_id: Annotated[str, Field(description="The task the iteration worked on.")],
        outcome: Literal["completed", "failed"],
        error: Annotated[str | None, Field(description="For failed: what went wrong.")] = None,
        session_id: Annotated[str | None, Field(description="The agent's session id.")] = None,
        cost: Annotated[float | None, Field(description="USD this session cost.")] = None,
        turns: Annotated[int | None, Field(description="Turns this session took.")] = None,
        idempotency_key: IdempotencyKey = None,
    ) -> IterationResult:
        """Record how an iteration ended; a session's cost and turns are counted once."""
        return await self.store.end_iteration(
            project,
            run,
            bead_id,
            outcome,
            error=error,
            session_id=session_id,
            cost=cost,
            turns=turns,
            idempotency_key=idempotency_key,
        )

    @_tool(READS)
    async def get_run_state(self, project: Project, run: Name = "default") -> FileResult:
        """The run's state.json, exactly as atari writes it: tasks, attempts, cost, turns."""
        return await _file(await self.store.export_state(project, run))

    # Feature contexts and handovers (sdd-unified).

    @_tool(READS)
    async def get_feature_context(self, project: Project, feature: Name) -> FileResult:
        """The feature's context.json: its phase, handover notes, reviews and circuit breaker."""
        return await _file(await self.store.export_context(project, feature))

    @_tool(WRITES)
    async def add_handover(
        self,
        project: Project,
        feature: Name,
        from_agent: Annotated[str, Field(description="The agent handing over.")],
        to_agent: Annotated[str, Field(description="The agent taking over.")],
        task_completed: Annotated[str, Field(description="What was finished.")],
        message: Annotated[str, Field(description="What the next agent needs to know.")],
        critical_points: Strings | None = None,
        artifacts_created: Strings | None = None,
        idempotency_key: IdempotencyKey = None,
    ) -> HandoverAppended:
        """Hand a feature over to another agent: appends a note to its handover history."""
        note: dict[str, Any] = {
            "from_agent": from_agent,
            "to_agent": to_agent,
            "task_completed": task_completed,
            "message": message,
        }
        if critical_points is not None:
            note["critical_points"] = critical_points
        if artifacts_created is not None:
            note["artifacts_created"] = artifacts_created
        return await self.store.append_handover(
            project, feature, note, idempotency_key=idempotency_key
        )

    @_tool(WRITES)
    async def record_review(
        self,
        project: Project,
        feature: Name,
        phase: Annotated[str, Field(description="The phase reviewed, e.g. design or code.")],
        outcome: ReviewOutcome,
        rejecting_agents: Strings | None = None,
        issues_count: int = 0,
        idempotency_key: IdempotencyKey = None,
    ) -> BreakerChange:
        """Record a review of a feature's phase; repeated rejections trip its circuit breaker,
        which then needs a human (`tripped`)."""
        return await self.store.record_review(
            project,
            feature,
            phase,
            outcome,
            rejecting_agents=rejecting_agents or (),
            issues_count=issues_count,
            idempotency_key=idempotency_key,
        )

    @_tool(WRITES)
    async def reset_circuit_breaker(
        self, project: Project, feature: Name, idempotency_key: IdempotencyKey = None
    ) -> BreakerChange:
        """Reset a feature's tripped circuit breaker once a human has intervened."""
        return await self.store.reset_circuit_breaker(
            project, feature, idempotency_key=idempotency_key
        )

    @_tool(READS)
    async def list_handovers(
        self,
        project: Project,
        to_agent: Annotated[str | None, Field(description="Notes for this agent.")] = None,
        from_agent: Annotated[str | None, Field(description="Notes by this agent.")] = None,
        feature_id: Annotated[str | None, Field(description="Notes of this feature.")] = None,
        cursor: Cursor = None,
        limit: Limit = None,
    ) -> Page[HandoverItem]:
        """Handover notes across the project's features, newest first: call it with your own
        agent name as to_agent to find the work handed to you."""
        return await self.store.list_handovers(
            project,
            to_agent=to_agent,
            from_agent=from_agent,
            feature_id=feature_id,
            cursor=cursor,
            limit=limit,
        )

    # Project memory (Context Agent).

    @_tool(WRITES)
    async def add_memory_item(
        self,
        project: Project,
        kind: Annotated[ItemKind, Field(description="Which memory the item belongs to.")],
        item: Annotated[
            dict[str, Any],
            Field(
                description="The item as Context Agent writes it: a decision's decision, "
                "rationale, category; a failure's description, severity, resolution; a "
                "constraint's constraint, type. id and timestamps are filled in."
            ),
        ],
        idempotency_key: IdempotencyKey = None,
    ) -> ItemCreated:
        """Remember a decision, a failure (and how it was resolved) or a constraint for the
        whole project, so that later sessions and other agents respect it."""
        return await self.store.create_memory_item(
            project, kind, item, idempotency_key=idempotency_key
        )

    @_tool(READS)
    async def search_memory(
        self,
        project: Project,
        kind: ItemKind,
        q: Annotated[str | None, Field(description="Words to search for.")] = None,
        feature_id: Annotated[str | None, Field(description="Only this feature's.")] = None,
        cursor: Cursor = None,
        limit: Limit = None,
    ) -> Page[MemoryItemPublic]:
        """Search the project's decisions, failures or constraints, newest first: before
        deciding, check what was decided or what failed already."""
        return await self.store.list_memory_items(
            project, kind, q=q, feature_id=feature_id, cursor=cursor, limit=limit
        )

    @_tool(READS)
    async def get_running_summary(self, project: Project) -> FileResult:
        """The project's running summary (running-summary.json): what the project is, where
        it stands."""
        return await _file(await self.store.get_running_summary(project))

    @_tool(REPLACES)
    async def put_running_summary(
        self,
        project: Project,
        summary: Annotated[
            dict[str, Any],
            Field(description="The running-summary.json document; `content` is the summary."),
        ],
    ) -> SummaryReceipt:
        """Replace the project's running summary (its `content` has a token limit)."""
        content = await _written(summary)
        return await self.store.put_running_summary(project, content)

    @_tool(READS)
    async def get_context_pack(
        self,
        project: Project,
        feature_id: Annotated[str | None, Field(description="The feature you work on.")] = None,
        about: Annotated[str | None, Field(description="What you are about to do.")] = None,
        max_tokens: Annotated[int | None, Field(description="The pack's token budget.")] = None,
    ) -> Annotated[CallToolResult, ContextPack]:
        """What to read before working on a feature: the running summary and the most relevant
        decisions, failures and constraints, as markdown within a token budget."""
        pack = await self.store.context_pack(
            project, feature_id=feature_id, about=about, max_tokens=max_tokens
        )
        return CallToolResult(
            content=[TextContent(type="text", text=pack.markdown)],
            structured_content=pack.model_dump(mode="json"),
        )

    def all(self) -> list[tuple[Callable[..., Awaitable[Any]], ToolAnnotations]]:
        """Every tool, in the order written here, with what it does to the store."""
        return [
            (getattr(self, name), getattr(member, _ANNOTATIONS))
            for name, member in vars(StoreTools).items()
            if hasattr(member, _ANNOTATIONS)
        ]
