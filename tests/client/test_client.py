"""The Python client against the real app (in process, over httpx), on both databases."""

import asyncio
import json
import re
from http import HTTPStatus

import httpx
import pytest

from app.client import AsyncContextStoreClient, ContextStoreClient, ContextStoreError
from app.client.endpoint import Endpoint
from app.client.routes import Routes
from tests.helpers import golden_bytes, python_indent2, seed_save, tar_gz, workspace_files

# One example call of every method: the completeness test below checks that together they
# reach every route the service documents, and that no method calls a route that is not one.
EXAMPLES: dict[str, tuple[object, ...]] = {
    "healthz": (),
    "readyz": (),
    "metrics": (),
    "list_projects": (),
    "get_project": ("p",),
    "delete_project": ("p",),
    "import_save": ("p", b"{}"),
    "list_saves": ("p",),
    "latest_save": ("p",),
    "export_save": ("p", 1),
    "resume_save": ("p", 1),
    "delete_save": ("p", 1),
    "prune_saves": ("p", 3),
    "put_snapshot": ("p", "a", b"{}"),
    "get_snapshot": ("p", "a"),
    "delete_snapshot": ("p", "a"),
    "append_memory": ("p", "a", "episodic", []),
    "list_memory": ("p", "a", "semantic"),
    "export_memory": ("p", "a", "raw-traces"),
    "restore": ("p", "a", "prompt"),
    "list_runs": ("p",),
    "put_state": ("p", "r", b"{}"),
    "export_state": ("p", "r"),
    "export_backup": ("p", "r"),
    "load_state": ("p", "r", b"{}"),
    "start_iteration": ("p", "r", "b"),
    "end_iteration": ("p", "r", "b", "completed"),
    "patch_state": ("p", "r", {}),
    "delete_run": ("p", "r"),
    "create_feature": ("p", "f"),
    "list_features": ("p",),
    "export_context": ("p", "f"),
    "put_context": ("p", "f", b"{}"),
    "patch_context": ("p", "f", {}),
    "delete_context": ("p", "f"),
    "export_workflow": ("p", "f"),
    "put_workflow": ("p", "f", b"{}"),
    "delete_workflow": ("p", "f"),
    "append_handover": ("p", "f", {}),
    "list_handovers": ("p",),
    "record_review": ("p", "f", "design-l1", "APPROVED"),
    "reset_circuit_breaker": ("p", "f"),
    "get_running_summary": ("p",),
    "put_running_summary": ("p", b"{}"),
    "export_memory_file": ("p", "key-decisions.json"),
    "put_memory_file": ("p", "key-decisions.json", b"[]"),
    "memory_maintenance": ("p",),
    "context_pack": ("p",),
    "export_archive": ("p",),
    "list_archive_members": ("p",),
    "import_archive": ("p", b""),
    "create_key": (["read"],),
    "list_keys": (),
    "get_key": ("k",),
    "revoke_key": ("k",),
}


# The item routes are one method each, for the three kinds.
ITEM_EXAMPLES = [
    (name, ("p", kind, *rest))
    for kind in ("decisions", "failures", "constraints")
    for name, rest in (
        ("list_memory_items", ()),
        ("create_memory_item", ({},)),
        ("get_memory_item", ("c/1",)),
        ("patch_memory_item", ("d", {})),
        ("delete_memory_item", ("f",)),
    )
]


def _operations(app) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        for method in operations
    }


def _template_matches(template: str, path: str) -> bool:
    pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
    return re.fullmatch(pattern, path) is not None


def test_the_client_has_a_method_for_every_route_and_no_other(app):
    endpoints = {name for name, value in vars(Routes).items() if isinstance(value, Endpoint)}
    examples = [*EXAMPLES.items(), *ITEM_EXAMPLES]
    assert endpoints == {name for name, _ in examples}
    reached = set()
    for name, args in examples:
        call = getattr(Routes, name).build(None, *args)
        matches = {
            (method, template)
            for method, template in _operations(app)
            if method == call.method and _template_matches(template, call.path)
        }
        # A literal route (saves/latest) also fits the template beside it (saves/{id}).
        assert matches, f"{name}: {call.method} {call.path} is not a route"
        reached |= {min(matches, key=lambda match: match[1].count("{"))}
    assert reached == _operations(app)


@pytest.mark.parametrize("crafted", ["", "../admin/keys?", "a/b", "..", "p#x"])
def test_no_argument_of_any_method_changes_which_route_it_calls(crafted):
    """Every value a method puts into its path is one escaped segment, so no argument can make
    it another route (or this one's query); an empty one is refused, not sent as an empty
    segment (which would be another route's path, or the collection's)."""
    for name, args in [*EXAMPLES.items(), *ITEM_EXAMPLES]:
        build = getattr(Routes, name).build
        path = build(None, *args).path
        for position, value in enumerate(args):
            if not isinstance(value, str):
                continue
            changed = (*args[:position], crafted, *args[position + 1 :])
            try:
                call = build(None, *changed)
            except ValueError:  # an empty name, or a memory file no route has
                continue
            assert "//" not in call.path and not call.path.endswith("/"), (name, call.path)
            assert "?" not in call.path and "#" not in call.path, (name, call.path)
            assert call.path.count("/") == path.count("/"), (name, call.path)


def _sync(client: httpx.Client) -> ContextStoreClient:
    return ContextStoreClient(http=client)


def test_documents_round_trip_through_the_client(client, project):
    store = _sync(client)
    receipt = store.import_save(project, python_indent2(seed_save()))
    assert receipt.filename == "mdan-save-1705314225.json"
    exported = store.export_save(project, receipt.id)
    assert exported.content == python_indent2(seed_save())
    assert exported.filename == receipt.filename and exported.etag
    assert store.list_saves(project).items[0].id == receipt.id
    assert [s.id for s in store.list_saves(project, filename=receipt.filename).items] == [
        receipt.id
    ]
    assert store.list_saves(project, filename="mdan-save-1.json").items == []

    snapshot = golden_bytes("autobyteus/working_context_snapshot.json")
    agent = json.loads(snapshot)["agent_id"]
    assert store.put_snapshot(project, agent, snapshot).agent_id == agent
    assert store.get_snapshot(project, agent).content == snapshot
    episodic = golden_bytes("autobyteus/episodic.jsonl")
    assert store.append_memory(project, agent, "episodic", episodic).appended >= 1
    assert store.export_memory(project, agent, "episodic").content == episodic
    restored = store.restore(project, agent, "You are helpful.")
    assert restored.source == "cache"

    state = golden_bytes("atari-state-v2.json")
    assert store.load_state(project, "r1", state).outcome == "stored"
    assert store.export_state(project, "r1").content == state
    started = store.start_iteration(project, "r1", "bd-1")
    assert started.entry.status == "working"
    ended = store.end_iteration(project, "r1", "bd-1", "completed", session_id="s", cost=0.5)
    assert ended.counted is True

    created = store.create_feature(project, "f1")
    assert json.loads(created.content)["feature_id"] == "f1"
    note = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"}
    assert store.append_handover(project, "f1", note).index == 0
    assert store.list_handovers(project, to_agent="b").items[0].feature_id == "f1"
    change = store.record_review(project, "f1", "design-l1", "APPROVED")
    assert change.iteration_tracking["design-l1"]["status"] == "approved"
    workflow = b'{"init": {"status": "READY", "dependencies": []}}'
    assert store.put_workflow(project, "f1", workflow).size_bytes == len(workflow)
    assert store.export_workflow(project, "f1").content == workflow
    store.delete_workflow(project, "f1")

    summary = golden_bytes("memory-running-summary.json")
    assert store.put_memory_file(project, "running-summary.json", summary).created is True
    assert store.get_running_summary(project).content == summary
    item = store.create_memory_item(project, "decisions", {"decision": "use httpx"})
    assert store.get_memory_item(project, "decisions", item.id).id == item.id
    assert store.list_memory_items(project, "decisions", q="httpx").items[0].id == item.id
    assert store.context_pack(project).token_count > 0

    projects = store.list_projects().items
    assert [p.name for p in projects] == [project]


def test_downloads_name_the_copy_they_hold_and_get_304_while_it_is_current(client, project):
    store = _sync(client)
    store.import_save(project, python_indent2(seed_save()))
    snapshot = golden_bytes("autobyteus/working_context_snapshot.json")
    agent = json.loads(snapshot)["agent_id"]
    store.put_snapshot(project, agent, snapshot)
    store.append_memory(project, agent, "episodic", golden_bytes("autobyteus/episodic.jsonl"))
    store.load_state(project, "r1", b"not a state")  # kept as the backup
    store.create_feature(project, "f1")
    store.put_workflow(project, "f1", b'{"init": {"status": "READY", "dependencies": []}}')
    store.put_memory_file(
        project, "running-summary.json", golden_bytes("memory-running-summary.json")
    )
    store.create_memory_item(project, "decisions", {"decision": "use httpx"})
    downloads = {
        "latest save": lambda **kw: store.latest_save(project, **kw),
        "snapshot": lambda **kw: store.get_snapshot(project, agent, **kw),
        "episodic": lambda **kw: store.export_memory(project, agent, "episodic", **kw),
        "state": lambda **kw: store.export_state(project, "r1", **kw),
        "backup": lambda **kw: store.export_backup(project, "r1", **kw),
        "context": lambda **kw: store.export_context(project, "f1", **kw),
        "workflow": lambda **kw: store.export_workflow(project, "f1", **kw),
        "summary": lambda **kw: store.get_running_summary(project, style="snake", **kw),
        "decisions": lambda **kw: store.export_memory_file(project, "key-decisions.json", **kw),
    }
    for name, download in downloads.items():
        held = download()
        assert held.modified and held.content and held.etag, name
        unchanged = download(if_none_match=held.etag)
        assert (unchanged.modified, unchanged.content, unchanged.etag) == (False, b"", held.etag)
        assert download(if_none_match='"another"') == held, name
    # Once the file changes, the old tag brings the new file.
    held = store.export_context(project, "f1")
    note = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"}
    store.append_handover(project, "f1", note)
    changed = store.export_context(project, "f1", if_none_match=held.etag)
    assert changed.modified and changed.etag != held.etag and changed.content != held.content


def test_problems_raise_one_error_class_with_the_problem(client, project):
    store = _sync(client)
    with pytest.raises(ContextStoreError) as raised:
        store.put_snapshot(project, "a", b'{"schema_version": 9}')
    error = raised.value
    assert error.status == 422
    assert error.type == "urn:context-store:problem:validation-error"
    assert error.title == HTTPStatus(422).phrase
    assert error.detail and error.errors and {"path", "message"} <= set(error.errors[0])
    with pytest.raises(ContextStoreError) as missing:
        store.latest_save(project)
    assert missing.value.status == 404 and missing.value.errors == []
    store.load_state(project, "r", b"{}")
    with pytest.raises(ContextStoreError) as changed:
        store.delete_project(project, if_match='"not-the-current-one"')
    assert changed.value.status == 412


def test_the_archive_through_the_client(client, project):
    store = _sync(client)
    files = workspace_files()
    report = store.import_archive(project, tar_gz(files))
    assert report.refused == [] and len(report.imported) == len(files)
    whole = store.export_archive(project)
    assert whole.filename == f"{project}.tar.gz"
    chunks: list[bytes] = []
    seen: list[int] = []
    store.download_archive(project, chunks.append, lambda received, _total: seen.append(received))
    assert b"".join(chunks) == whole.content
    assert seen and seen[-1] == len(whole.content)


def test_the_async_client_does_the_same(app, client, project):
    headers = {"Authorization": client.headers["Authorization"]}

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://test", headers=headers) as http,
            AsyncContextStoreClient(http=http) as store,
        ):
            receipt = await store.import_save(project, python_indent2(seed_save()))
            exported = await store.latest_save(project)
            assert exported.content == python_indent2(seed_save())
            report = await store.import_archive(project + "-b", tar_gz(workspace_files()))
            assert report.refused == []
            archive = await store.export_archive(project + "-b")
            assert archive.content.startswith(b"\x1f\x8b")
            with pytest.raises(ContextStoreError) as raised:
                await store.export_save(project, receipt.id + 1000)
            assert raised.value.status == 404

    asyncio.run(scenario())


def test_a_non_problem_error_still_raises_the_error_class():
    def reply(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    http = httpx.Client(transport=httpx.MockTransport(reply), base_url="http://test")
    with pytest.raises(ContextStoreError) as raised:
        ContextStoreClient(http=http).healthz()
    assert raised.value.status == 502 and raised.value.title == "Bad Gateway"
    assert raised.value.body == "<html>bad gateway</html>"
