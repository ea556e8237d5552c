"""The MCP server: the tools, the exported files as resources, and the resume prompt, all
sending their requests with one client, ``store``."""

import base64
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    InputRequiredResult,
    ListResourcesResult,
    PaginatedRequestParams,
    Resource,
)
from pydantic import ValidationError

from app import __version__
from app.client import AsyncContextStoreClient
from app.mcp_server import files
from app.mcp_server.errors import answering
from app.mcp_server.tools import StoreTools
from app.redaction import redact_value

INSTRUCTIONS = """\
context-store keeps coding agents' working memory per project: MDAN-AUTO saves, autobyteus
working-context snapshots and agent memory, atari run state, sdd-unified feature contexts and
handovers, and Context Agent project memory (decisions, failures, constraints, running
summary). Start with list_projects; before working on a feature, get_context_pack; when you
take over work, list_handovers with your agent name. Every file is also a resource,
context-store://{project}/{path}, as the tool that wrote it laid it out."""


@dataclass(frozen=True)
class _Position:
    """Where a listing of resources stands: the cursor of ``list_projects`` whose page (of one)
    is the project being listed, that project's name, and the cursor of its files (which holds
    for that project only: if it is gone by the next page, the next project starts at its
    first file). Encoded here, not with the routes' cursors (``app/core/pagination.py``), which
    would load SQLAlchemy into ``context-store mcp``."""

    projects: str | None = None
    project: str | None = None
    files: str | None = None

    def encode(self) -> str:
        payload = orjson.dumps([self.projects, self.project, self.files])
        return base64.urlsafe_b64encode(payload).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> "_Position":
        padded = cursor + "=" * (-len(cursor) % 4)
        try:
            # orjson, not json: a cursor nested past its limit is a ValueError, where Python's
            # parser would raise RecursionError.
            parts = orjson.loads(base64.urlsafe_b64decode(padded))
            if not isinstance(parts, list) or len(parts) != 3:
                raise ValueError("not a position")
            projects, project, project_files = parts
            if not all(part is None or isinstance(part, str) for part in parts):
                raise ValueError("not a position")
        except (ValueError, TypeError):  # binascii's and orjson's errors are ValueErrors
            raise MCPError(INVALID_PARAMS, "The cursor is not one this list handed out.") from None
        return cls(projects, project, project_files)

    def files_of(self, project: str) -> str | None:
        """The files cursor, for ``project``: none for another one."""
        return self.files if project == self.project else None


class ContextStoreServer(MCPServer):
    """Lists resources a project at a time, each page a page of that project's files (the
    archive's members, listed without building the archive): bounded however many projects
    and files a tenant has."""

    def __init__(self, store: AsyncContextStoreClient) -> None:
        # MCPServer's constructor calls logging.basicConfig (a rich handler on the root logger
        # when it has none yet); the service's logs are JSON lines of its own configuration
        # (app/core/logs.py), so the root logger is put back as it was.
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        super().__init__(
            "context-store",
            version=__version__,
            instructions=INSTRUCTIONS,
        )
        root.handlers[:] = handlers
        root.setLevel(level)
        self.store = store

    async def _handle_list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        position = _Position.decode(cursor) if cursor is not None else _Position()
        store = self.store
        # A 4xx is the caller's cursor: its params.
        with answering(_invalid_params, ResourceError):
            projects = await store.list_projects(cursor=position.projects, limit=1)
            if not projects.items:
                return ListResourcesResult(resources=[], next_cursor=None)
            project = projects.items[0].name
            paths, files_cursor = await files.paths(store, project, position.files_of(project))
        resources = [
            Resource(
                uri=files.uri(project, path),
                name=f"{project}/{path}",
                mime_type=files.media_type(path),
            )
            for path in paths
        ]
        if files_cursor is not None:
            following: _Position | None = _Position(position.projects, project, files_cursor)
        elif projects.next_cursor is not None:
            following = _Position(projects.next_cursor)
        else:
            following = None
        next_cursor = following.encode() if following is not None else None
        return ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[Any, Any] | None = None,
    ) -> CallToolResult | InputRequiredResult:
        """Rejected arguments are named, their values not repeated: the SDK's error text is
        pydantic's, which quotes each value (a key pasted into the wrong argument, echoed)."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            invalid = error.__cause__
            if not isinstance(invalid, ValidationError):
                raise
            lines = [f"Error executing tool {name}: invalid arguments"]
            lines += [
                f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}"
                for item in invalid.errors(include_input=False, include_url=False)
            ]
            raise ToolError("\n".join(lines)) from invalid

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        context: Context[Any, Any] | None = None,
    ) -> GetPromptResult | InputRequiredResult:
        """An unknown prompt or a missing argument is the caller's: an invalid-params error, not
        the SDK's ValueError (logged with its traceback, answered with code 0)."""
        prompt = next((prompt for prompt in await self.list_prompts() if prompt.name == name), None)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
        required = {argument.name for argument in prompt.arguments or [] if argument.required}
        missing = sorted(required - set(arguments or {}))
        if missing:
            raise MCPError(INVALID_PARAMS, f"Missing required arguments: {', '.join(missing)}")
        return await super().get_prompt(name, arguments, context)


def _invalid_params(text: str) -> MCPError:
    return MCPError(INVALID_PARAMS, text)


def _reader(
    store: AsyncContextStoreClient, template: files.Template
) -> Callable[..., Awaitable[str | bytes]]:
    """The template's read: a function of its variables (the SDK matches them by name)."""

    async def read(**values: str) -> str | bytes:
        path = template.path.format(**values)
        uri = files.uri(values["project"], path)
        # The route's 4xx (404, another tenant's project included; 422 for a name no file can
        # have) is the caller's URI: resource not found (SEP-2164: -32602 with the URI in
        # `data`), not an internal error.
        with answering(
            lambda text: ResourceNotFoundError(f"{uri}: {text}"),
            lambda text: ResourceError(f"{uri}: {text}"),
        ):
            try:
                content = await files.read(store, values["project"], path)
            except LookupError as error:
                raise ResourceNotFoundError(f"{uri}: {error}") from None
        try:
            return content.decode()  # text, when it is UTF-8: the same bytes once encoded
        except UnicodeDecodeError:
            return content

    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)
        for name in template.variables
    ]
    # The SDK reads the signature, pydantic (validate_call) the annotations.
    read.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # see above
    read.__annotations__ = {name: str for name in template.variables}
    read.__name__ = template.name.replace("-", "_")
    return read


# A handover's message as the resume prompt quotes it: a note is a few lines, and one of
# megabytes is the agent's to read with list_handovers, not the prompt's to carry.
PROMPT_NOTE_CHARACTERS = 2000


def _prompt_note(message: str) -> str:
    if len(message) <= PROMPT_NOTE_CHARACTERS:
        return message
    more = len(message) - PROMPT_NOTE_CHARACTERS
    return f"{message[:PROMPT_NOTE_CHARACTERS]}… ({more:,} characters more: list_handovers)"


def _resume_prompt(store: AsyncContextStoreClient) -> Callable[..., Awaitable[str]]:
    async def resume_where_i_left_off(project: str, agent: str, feature: str | None = None) -> str:
        """Pick up a project where the last session left it: the context pack (running
        summary, decisions, failures, constraints), the newest save and the notes handed to
        you."""
        # An MCP error passes the SDK's prompt wrapper as it is: the problem, not "Error
        # rendering prompt" and a logged traceback.
        with answering(_invalid_params, lambda text: MCPError(INTERNAL_ERROR, text)):
            pack = await store.context_pack(project, feature_id=feature)
            saves = await store.list_saves(project, limit=1)
            handovers = await store.list_handovers(project, to_agent=agent, limit=10)
        # It quotes its arguments (the agent need not exist): a secret pasted there goes as
        # it would in a problem. The rest is the store's answers, redacted as they were
        # stored: walked again, ten handovers of 3.9 MB held the event loop 7.5 s (2026-11-27).
        opening = redact_value(f"You are {agent}, resuming work on project {project}.")
        lines = [opening, "", pack.markdown]
        if saves.items:
            save = saves.items[0]
            lines += [
                "",
                f"The newest MDAN-AUTO save is {save.filename} (id {save.id}), in phase "
                f"{save.current_phase}: read it with latest_mdan_save, or resume_mdan_save.",
            ]
        if handovers.items:
            lines += ["", "## Handed over to you"]
            lines += [
                f"- {item.feature_id}: {_prompt_note(str(item.note.get('message', '')))} "
                f"(from {item.note.get('from_agent')})"
                for item in handovers.items
            ]
        return "\n".join(lines)

    return resume_where_i_left_off


def build_server(store: AsyncContextStoreClient) -> ContextStoreServer:
    server = ContextStoreServer(store)
    for tool, annotations in StoreTools(store).all():
        server.add_tool(tool, annotations=annotations, structured_output=True)
    for template in files.TEMPLATES:
        server.resource(
            template.uri_template,
            name=template.name,
            description=template.description,
            mime_type=files.media_type(template.path),
        )(_reader(store, template))
    server.prompt()(_resume_prompt(store))
    return server
