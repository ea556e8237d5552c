"""Assertions and builders the tests share."""

import io
import json
import os
import tarfile
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx

GOLDEN = Path(__file__).parent / "formats" / "golden"
# Where a test reaches an app with AUTH=off: it answers loopback names only
# (app/core/rebinding.py).
LOOPBACK = "http://127.0.0.1:8000"

# How many times over the reliability tests run their generated cases and their load:
# 1 in the suite, more under `make soak`.
SOAK = max(1, int(os.environ.get("CONTEXT_STORE_SOAK", "1")))


def golden_bytes(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def go_written_atari_states() -> list[str]:
    """The golden atari states Go's encoder wrote (``tests/formats/generators/atari_state.sh``),
    by their names under the golden folder."""
    folders = (GOLDEN / "atari", GOLDEN / "workspace" / ".atari")
    names = (
        path.relative_to(GOLDEN).as_posix() for folder in folders for path in folder.rglob("*.json")
    )
    return sorted(names)


def seed_save() -> dict[str, Any]:
    """The example save of seed 000, as a document."""
    document: dict[str, Any] = json.loads(golden_bytes("mdan-save-seed-example.json"))
    return document


def python_indent2(document: Any) -> bytes:
    return json.dumps(document, indent=2).encode()


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status, and leaks no internals."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    text = response.text
    assert body["status"] == status
    assert body["type"].startswith("urn:context-store:problem:")
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    if status == 422:  # the contract: a 422 always says where, whichever route refused
        errors = body.get("errors")
        assert errors, f"a 422 without errors: {text}"
        for error in errors:
            assert isinstance(error["path"], str) and error["message"], text
    for leak in ("Traceback", 'File "', "sqlalchemy", "psycopg", "SELECT ", "INSERT "):
        assert leak not in text, f"{leak!r} leaked into a problem: {text}"
    return body


def import_save(client: httpx.Client, project: str, document: Any, **kwargs: Any) -> httpx.Response:
    content = document if isinstance(document, bytes) else python_indent2(document)
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    return client.post(f"/v1/projects/{project}/saves", content=content, headers=headers, **kwargs)


def workspace_files() -> dict[str, bytes]:
    """One file of every kind the project archive carries, by its path in the tools' layout,
    each as its tool writes it (the golden files; the golden workspace's autobyteus agent
    too, with the raw_traces_archive.jsonl of its compactions)."""
    snapshot = golden_bytes("autobyteus/working_context_snapshot.json")
    agent = json.loads(snapshot)["agent_id"]
    context = golden_bytes("sdd-context-tool-written.json")
    feature = json.loads(context)["feature_id"]
    return {
        "mdan/mdan-save-1705314225.json": python_indent2(seed_save()),
        f"memory/agents/{agent}/working_context_snapshot.json": snapshot,
        f"memory/agents/{agent}/raw_traces.jsonl": golden_bytes("autobyteus/raw_traces.jsonl"),
        f"memory/agents/{agent}/episodic.jsonl": golden_bytes("autobyteus/episodic.jsonl"),
        f"memory/agents/{agent}/semantic.jsonl": golden_bytes("autobyteus/semantic.jsonl"),
        ".atari/state.json": golden_bytes("atari-state-v2.json"),
        ".atari/state.json.backup": b'{"version": 0, "not": "readable by atari"',
        ".atari/runs/nightly/state.json": golden_bytes("atari-state-v2.json"),
        f"features/{feature}/context.json": context,
        **{
            str(path.relative_to(GOLDEN / "workspace")): path.read_bytes()
            for path in sorted((GOLDEN / "workspace" / "memory" / "agents").glob("*/*"))
        },
        ".autonomous/context/running-summary.json": golden_bytes("memory-running-summary.json"),
        ".autonomous/context/key-decisions.json": golden_bytes("memory-key-decisions.json"),
        ".autonomous/context/failure-memory.json": golden_bytes("memory-failure-memory.snake.json"),
        ".autonomous/context/active-constraints.json": golden_bytes(
            "memory-active-constraints.json"
        ),
    }


def tar_gz(members: dict[str, bytes]) -> bytes:
    """A .tar.gz as the tar tool makes one (tarfile itself, not the service's writer)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def untar(archive: bytes) -> dict[str, bytes]:
    """The regular files of a .tar.gz, by name, in order."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {
            member.name: tar.extractfile(member).read()  # type: ignore[union-attr]
            for member in tar
            if member.isreg()
        }


def raw_trace(turn_id: str, seq: int) -> dict[str, Any]:
    """A user message of a turn; a rebuilt summary lists it as ``(turn:seq) USER: turn seq``."""
    return {
        "id": f"rt_{turn_id}_{seq}",
        "ts": 1738100000.0 + seq,
        "turn_id": turn_id,
        "seq": seq,
        "trace_type": "user",
        "content": f"{turn_id} {seq}",
        "source_event": "LLMUserMessageReadyEvent",
    }


def recent_turns(client: httpx.Client, project: str, agent: str, turns: int) -> list[str]:
    """The "[RECENT TURNS]" lines of a restore rebuilt from the agent's memory alone."""
    agent_url = f"/v1/projects/{project}/agents/{agent}"
    client.delete(f"{agent_url}/working-context-snapshot")  # no cache: a rebuild
    options = {"system_prompt": "S", "max_episodic": 0, "max_semantic": 0}
    restored = client.post(f"{agent_url}/restore", json=options | {"raw_tail_turns": turns})
    assert restored.json()["source"] == "rebuild", restored.text
    messages = restored.json()["snapshot"]["messages"]
    if len(messages) == 1:  # the system prompt alone: nothing to summarise
        return []
    header, *lines = messages[1]["content"].split("\n")
    assert header == "[RECENT TURNS]"
    return lines


GOLDEN_WORKSPACE = GOLDEN / "workspace"


def golden_workspace_files(*tops: str) -> dict[str, bytes]:
    """The golden workspace's files under the given top directories (relative paths, in the
    archive layout), as the real writers wrote them."""
    return {
        path.relative_to(GOLDEN_WORKSPACE).as_posix(): path.read_bytes()
        for top in tops
        for path in sorted((GOLDEN_WORKSPACE / top).rglob("*"))
        if path.is_file()
    }


def http_scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The ASGI scope of a request as uvicorn hands it to the app, for tests and the bench that
    call the app directly (what a client cannot make an HTTP client send, or without its cost)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


def one_turn_without_wait(turns: Any, monkeypatch: Any) -> None:
    """One of the app's ``Turns`` (``app.state.bulk_imports``, ``.archive_exports``) made one
    a tenant, and no wait (set on the turns themselves: starlette's State loses an attribute
    monkeypatch sets on it)."""
    monkeypatch.setattr(turns, "per_tenant", 1)
    monkeypatch.setattr(turns, "wait_seconds", 0)


def hold_first_call(
    monkeypatch: Any, owner: object, name: str
) -> tuple[threading.Event, threading.Event]:
    """``owner.name`` patched so that its first call, once it has set ``entered``, waits until
    ``release`` is set: a request held in the middle of its work while others are sent."""
    entered, release = threading.Event(), threading.Event()
    original = getattr(owner, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            release.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    return entered, release


# How long a test waits for an app's deleter: a bound that a working deleter ends at once on a
# test's projects, not a measure of anything.
DELETER_WAIT_SECONDS = 60


def wait_for_the_deleter(app: Any) -> None:
    """Until the app's deleter (``app/projects/service.py`` ``ProjectDeleter``) has deleted the
    rows of every project deleted so far, and of those hidden at its start: a project's rows go
    after its delete's answer."""
    deleter = app.state.project_deleter
    assert deleter.wait_until_idle(DELETER_WAIT_SECONDS), "the deleter did not end its deletes"


class AsgiAnswer:
    """What an app called directly sent (a test that keeps a request half-way: a body still
    arriving, an answer not read), recorded by ``send``: ``started`` is set when the response
    starts, and with ``held`` its body is not taken until ``held`` is set."""

    def __init__(self, started: anyio.Event | None = None, held: anyio.Event | None = None) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""
        self._started = started
        self._held = held

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            if self._started is not None:
                self._started.set()
        elif message["type"] == "http.response.body":
            if self._held is not None:
                await self._held.wait()
            self.body += message.get("body", b"")

    def json(self) -> Any:
        return json.loads(self.body)
