"""Write the autobyteus golden files with autobyteus 1.4.4's own classes (not run by `make test`).

    python3 -m venv /tmp/ab && /tmp/ab/bin/pip install autobyteus==1.4.4
    /tmp/ab/bin/python tests/formats/generators/autobyteus_memory.py

An agent session is driven through the classes an autobyteus agent uses (MemoryManager with its
FileMemoryStore and WorkingContextSnapshotStore, LLMRequestAssembler, Compactor), with a
summarizer of our own in place of the LLM's, and a clock that counts instead of the wall clock
so that the files come out the same every time. Then the memory directory is restored as
``AgentFactory.restore_agent`` does (a new MemoryManager, WorkingContextSnapshotBootstrapper
with the default options): once from the cache, once with no cache (a rebuild from memory).

Outputs:
- ``golden/workspace/memory/agents/<AGENT>/``: the session's five files, as autobyteus left them
  (``raw_traces_archive.jsonl`` holds the traces two compactions pruned).
- ``golden/autobyteus/before-second-compaction/``: the same five files between the two
  compactions (what an earlier push would have carried).
- ``golden/autobyteus/restored-from-cache.json``, ``restored-by-rebuild.json``: the cache
  autobyteus persists after each restore.
- ``golden/autobyteus/cache-with-extras.json`` (an input, written here by hand: a cache holding
  fields ``Message`` does not know and ``arguments: null``) and
  ``cache-with-extras.restored.json``, what autobyteus persists after restoring from it.
- It also re-writes the hand-made fixtures ``golden/autobyteus/{raw_traces,episodic,semantic}
  .jsonl`` and ``working_context_snapshot.json`` through FileMemoryStore and the snapshot
  serializer, and stops if autobyteus would write them differently.
"""

import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from autobyteus.agent.events.agent_events import ToolResultEvent
from autobyteus.agent.llm_request_assembler import LLMRequestAssembler
from autobyteus.agent.tool_invocation import ToolInvocation
from autobyteus.llm.prompt_renderers.base_prompt_renderer import BasePromptRenderer
from autobyteus.llm.user_message import LLMUserMessage
from autobyteus.llm.utils.response_types import CompleteResponse
from autobyteus.memory.compaction.compaction_result import CompactionResult
from autobyteus.memory.compaction.compactor import Compactor
from autobyteus.memory.compaction.summarizer import Summarizer
from autobyteus.memory.memory_manager import MemoryManager
from autobyteus.memory.models.episodic_item import EpisodicItem
from autobyteus.memory.models.raw_trace_item import RawTraceItem
from autobyteus.memory.models.semantic_item import SemanticItem
from autobyteus.memory.policies.compaction_policy import CompactionPolicy
from autobyteus.memory.restore.working_context_snapshot_bootstrapper import (
    WorkingContextSnapshotBootstrapOptions,
    WorkingContextSnapshotBootstrapper,
)
from autobyteus.memory.store.file_store import FileMemoryStore
from autobyteus.memory.store.working_context_snapshot_store import WorkingContextSnapshotStore
from autobyteus.memory.working_context_snapshot_serializer import (
    WorkingContextSnapshotSerializer,
)

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
# An id as AgentFactory.create_agent makes them: f"{name}_{role}_{random 4 digits}".
AGENT = "coder_worker_4821"
SYSTEM_PROMPT = "You are a careful coding agent. Work in small steps and run the tests."
SNAPSHOT_FILE = "working_context_snapshot.json"
MEMORY_FILES = ("raw_traces.jsonl", "episodic.jsonl", "semantic.jsonl", "raw_traces_archive.jsonl")


class CountingClock:
    """time.time for the whole process: every call is a little later than the one before."""

    def __init__(self, start: float, step: float) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> float:
        self.now = round(self.now + self.step, 6)
        return self.now


class NoRenderer(BasePromptRenderer):
    """The request's rendering for a provider is not part of memory (and a provider's renderer
    would fetch the image URLs)."""

    async def render(self, messages: list) -> list:
        return []


class FixedSummarizer(Summarizer):
    """Stands in for the LLM that summarises the compacted turns."""

    def summarize(self, traces: list[RawTraceItem]) -> CompactionResult:
        turns = sorted({trace.turn_id for trace in traces})
        users = [trace.content for trace in traces if trace.trace_type == "user"]
        tools = sorted({trace.tool_name for trace in traces if trace.tool_name})
        return CompactionResult(
            episodic_summary=f"{', '.join(turns)}: the user asked {users!r}; tools used: "
            f"{', '.join(tools) or 'none'}.",
            semantic_facts=[
                {
                    "fact": f"Compacted {len(traces)} traces of {len(turns)} turns.",
                    "confidence": 1.0,
                },
                {
                    "fact": "Le dépôt utilise pytest — テスト.",
                    "tags": ["tests"],
                    "confidence": 0.75,
                },
            ],
        )


def memory_manager(base_dir: Path) -> MemoryManager:
    """As AgentFactory._create_runtime_with_id builds it."""
    return MemoryManager(
        store=FileMemoryStore(base_dir=base_dir, agent_id=AGENT),
        working_context_snapshot_store=WorkingContextSnapshotStore(
            base_dir=base_dir, agent_id=AGENT
        ),
    )


async def turn(
    manager: MemoryManager,
    assembler: LLMRequestAssembler,
    user: LLMUserMessage,
    tools: list[tuple[ToolInvocation, object, str | None]],
    answer: CompleteResponse,
) -> None:
    """One turn, in the order an agent's handlers call the memory manager."""
    turn_id = manager.start_turn()
    manager.ingest_user_message(user, turn_id=turn_id, source_event="LLMUserMessageReadyEvent")
    await assembler.prepare_request(user, current_turn_id=turn_id, system_prompt=SYSTEM_PROMPT)
    for invocation, result, error in tools:
        invocation.turn_id = turn_id
        manager.ingest_tool_intent(invocation, turn_id=turn_id)
        manager.ingest_tool_result(
            ToolResultEvent(
                tool_name=invocation.name,
                result=result,
                tool_invocation_id=invocation.id,
                turn_id=turn_id,
                error=error,
                tool_args=invocation.arguments,
            )
        )
    manager.ingest_assistant_response(
        answer, turn_id=turn_id, source_event="LLMCompleteResponseReceivedEvent"
    )


def copy_files(agent_dir: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for name in (SNAPSHOT_FILE, *MEMORY_FILES):
        shutil.copyfile(agent_dir / name, into / name)


async def session(base_dir: Path, before_second_compaction: Path) -> None:
    manager = memory_manager(base_dir)
    policy = CompactionPolicy(raw_tail_turns=2)
    manager.compaction_policy = policy
    manager.compactor = Compactor(manager.store, policy, FixedSummarizer())
    assembler = LLMRequestAssembler(manager, NoRenderer())
    await turn(
        manager,
        assembler,
        LLMUserMessage("Lis le fichier de configuration, s'il te plaît."),
        [
            (
                ToolInvocation("read_file", {"path": "config.yaml"}, "call_a1"),
                {"port": 8080, "name": "dév"},
                None,
            )
        ],
        CompleteResponse("The service listens on port 8080.", reasoning="The file says so."),
    )
    await turn(
        manager,
        assembler,
        LLMUserMessage("Here is the failing screen", image_urls=["https://example.com/fail.png"]),
        [
            (
                ToolInvocation("run_tests", {"path": "tests", "verbose": True}, "call_b1"),
                None,
                "exit status 1",
            ),
            (
                ToolInvocation("read_file", {"path": "app/main.py"}, "call_b2"),
                "print('héllo')\n",
                None,
            ),
        ],
        CompleteResponse("One test fails: the greeting lost its accent."),
    )
    await turn(
        manager,
        assembler,
        LLMUserMessage("Fix it 🙂"),
        [
            (
                ToolInvocation(
                    "write_file", {"path": "app/main.py", "content": "print('héllo')\n"}, "call_c1"
                ),
                "written",
                None,
            )
        ],
        CompleteResponse("Fixed; 完了.", reasoning="Write then re-run."),
    )
    manager.request_compaction()
    await turn(
        manager,
        assembler,
        LLMUserMessage("Run the tests again"),
        [
            (
                ToolInvocation("run_tests", {"path": "tests"}, "call_d1"),
                {"passed": 12, "failed": 0},
                None,
            )
        ],
        CompleteResponse("All 12 tests pass."),
    )
    # What a push between the two compactions would carry.
    copy_files(base_dir / "agents" / AGENT, before_second_compaction)
    manager.request_compaction()
    await turn(
        manager,
        assembler,
        LLMUserMessage("Commit it"),
        [
            (
                ToolInvocation("git_commit", {"message": "Keep the accent"}, "call_e1"),
                "[main 3f2a1b9] Keep the accent",
                None,
            )
        ],
        CompleteResponse("Committed as 3f2a1b9."),
    )
    await turn(
        manager,
        assembler,
        LLMUserMessage("What is left?"),
        [(ToolInvocation("git_status", {}, "call_f1"), None, None)],
        CompleteResponse("Nothing: the tree is clean.", reasoning="git status shows no change."),
    )


def restore(base_dir: Path) -> bytes:
    """What AgentFactory.restore_agent leaves in the cache: a new MemoryManager, restored by
    the bootstrap step with WorkingContextSnapshotBootstrapOptions()."""
    manager = memory_manager(base_dir)
    WorkingContextSnapshotBootstrapper().bootstrap(
        manager, SYSTEM_PROMPT, WorkingContextSnapshotBootstrapOptions()
    )
    return (base_dir / "agents" / AGENT / SNAPSHOT_FILE).read_bytes()


def copy_of(agent_dir: Path, without_cache: bool = False) -> Path:
    base_dir = Path(tempfile.mkdtemp())
    shutil.copytree(agent_dir, base_dir / "agents" / AGENT)
    if without_cache:
        (base_dir / "agents" / AGENT / SNAPSHOT_FILE).unlink()
    return base_dir


def with_extras(cache: bytes) -> bytes:
    """A cache as another writer (or a hand) may leave it: keys ``Message`` does not know, at
    every level, and a tool call whose ``arguments`` is null."""
    document = json.loads(cache)
    document["written_by"] = "an editor"
    document["messages"][0]["name"] = "system-prompt"
    for message in document["messages"]:
        payload = message["tool_payload"]
        if payload and "tool_calls" in payload:
            payload["tool_calls"][0]["arguments"] = None
            payload["tool_calls"][0]["type"] = "function"
            payload["parallel"] = False
            break
    for message in document["messages"]:
        payload = message["tool_payload"]
        if payload and "tool_call_id" in payload:
            payload["duration_ms"] = 12
            break
    return json.dumps(document).encode()


def check_fixtures() -> None:
    """The hand-made fixtures are byte for byte what autobyteus writes for their items."""
    fixtures = GOLDEN / "autobyteus"
    base_dir = Path(tempfile.mkdtemp())
    snapshot_file = fixtures / SNAPSHOT_FILE
    agent = json.loads(snapshot_file.read_bytes())["agent_id"]
    store = FileMemoryStore(base_dir=base_dir, agent_id=agent)
    for name, item_class in (
        ("raw_traces.jsonl", RawTraceItem),
        ("episodic.jsonl", EpisodicItem),
        ("semantic.jsonl", SemanticItem),
    ):
        lines = (fixtures / name).read_text(encoding="utf-8").splitlines()
        store.add([item_class.from_dict(json.loads(line)) for line in lines if line.strip()])
    snapshot, _metadata = WorkingContextSnapshotSerializer.deserialize(
        json.loads(snapshot_file.read_bytes())
    )
    manager = MemoryManager(
        store=store,
        working_context_snapshot=snapshot,
        working_context_snapshot_store=WorkingContextSnapshotStore(
            base_dir=base_dir, agent_id=agent
        ),
    )
    manager.persist_working_context_snapshot()
    for name in ("raw_traces.jsonl", "episodic.jsonl", "semantic.jsonl", SNAPSHOT_FILE):
        written = (base_dir / "agents" / agent / name).read_bytes()
        if written != (fixtures / name).read_bytes():
            sys.exit(f"autobyteus writes {name} differently from the fixture")


def main() -> None:
    time.time = CountingClock(start=1763812345.678901, step=0.0137)
    check_fixtures()
    base_dir = Path(tempfile.mkdtemp())
    out = GOLDEN / "autobyteus"
    asyncio.run(session(base_dir, out / "before-second-compaction"))
    agent_dir = base_dir / "agents" / AGENT
    copy_files(agent_dir, GOLDEN / "workspace" / "memory" / "agents" / AGENT)
    (out / "restored-from-cache.json").write_bytes(restore(copy_of(agent_dir)))
    (out / "restored-by-rebuild.json").write_bytes(restore(copy_of(agent_dir, without_cache=True)))
    extras = with_extras((agent_dir / SNAPSHOT_FILE).read_bytes())
    (out / "cache-with-extras.json").write_bytes(extras)
    extras_dir = copy_of(agent_dir)
    (extras_dir / "agents" / AGENT / SNAPSHOT_FILE).write_bytes(extras)
    (out / "cache-with-extras.restored.json").write_bytes(restore(extras_dir))


if __name__ == "__main__":
    main()
