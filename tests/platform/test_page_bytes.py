"""A list page of large items ends at the body limit, in the answer and in the memory that
built it, on SQLite and PostgreSQL: every list whose items are documents (project memory's
decisions, failures and constraints, handovers, an agent's memory) holds at most `limit`
items whose documents hold at most `max_body_bytes` together (the first whatever its size),
and its cursors then give every item once, in order."""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlmodel import SQLModel

from app.agents.models import AgentMemoryItem
from app.features.models import FeatureContext, Handover
from app.memory.models import MemoryItem
from app.runs.models import RunState
from app.saves.models import Save
from tests.helpers import golden_bytes, import_save, python_indent2, seed_save

# A page's bound in these tests: two items of ITEM_CHARACTERS fit, a third does not.
BOUND = 2500
ITEM_CHARACTERS = 1000
AGENT = "coder"


@dataclass(frozen=True)
class Listed:
    """A list route: where it lists, the table its items are rows of, and how to add an item
    (``add(client, project, index, text)``: item ``index`` of a list, listed in index order)."""

    path: str
    model: type[SQLModel]
    add: Callable[[Any, str, int, str], None]


def _memory_item(plural: str, text_field: str, time_field: str) -> Callable[..., None]:
    def add(client: Any, project: str, index: int, text: str) -> None:
        # Newest first: the first item listed has the latest time.
        item = {"id": f"i{index}", text_field: text, time_field: 1_000_000 - index}
        response = client.post(f"/v1/projects/{project}/memory/{plural}", json=item)
        assert response.status_code == 201, response.text

    return add


def _handover(client: Any, project: str, index: int, text: str) -> None:
    features = f"/v1/projects/{project}/features"
    if index == 0:
        assert client.post(features, json={"feature_id": "f"}).status_code == 201
    note = {
        # Newest first: the first note listed has the latest timestamp.
        "timestamp": f"2026-01-01T00:{59 - index:02d}:00Z",
        "from_agent": "a",
        "to_agent": "b",
        "task_completed": f"i{index}",
        "message": text,
    }
    response = client.post(f"{features}/f/handovers", json=note)
    assert response.status_code == 201, response.text


def _agent_memory(client: Any, project: str, index: int, text: str) -> None:
    fact = {"id": f"i{index}", "ts": 1.0, "fact": text, "confidence": 1, "salience": 0.5}
    url = f"/v1/projects/{project}/agents/{AGENT}/memory/semantic"
    assert client.post(url, json=fact).status_code == 201


LISTS = {
    "decisions": Listed(
        "memory/decisions", MemoryItem, _memory_item("decisions", "decision", "timestamp")
    ),
    "failures": Listed(
        "memory/failures", MemoryItem, _memory_item("failures", "description", "timestamp")
    ),
    "constraints": Listed(
        "memory/constraints", MemoryItem, _memory_item("constraints", "description", "addedAt")
    ),
    "handovers": Listed("handovers", Handover, _handover),
    "agent memory": Listed(f"agents/{AGENT}/memory/semantic", AgentMemoryItem, _agent_memory),
}


def _index_of(item: dict[str, Any]) -> int:
    """Which item of the test an answer's item is."""
    label = item.get("id") or item.get("note", {}).get("task_completed")
    assert isinstance(label, str) and label.startswith("i"), item
    return int(label[1:])


@contextmanager
def _loads(model: type[SQLModel]) -> Iterator[list[int]]:
    """The bytes each row of ``model`` the server loads holds in its text and binary
    attributes, its documents among them: what the page cost in memory, whatever it answers."""
    loaded: list[int] = []

    def count(row: Any, _context: Any) -> None:
        values = row.__dict__.values()
        loaded.append(sum(len(v) for v in values if isinstance(v, bytes | str)))

    event.listen(model, "load", count)
    try:
        yield loaded
    finally:
        event.remove(model, "load", count)


def _pages(
    client: Any, project: str, listed: Listed, limit: int
) -> list[tuple[list[int], list[int]]]:
    """Every page of the list, following its cursors: each page's items (by index) and the
    bytes of the rows the server loaded for it."""
    pages = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        with _loads(listed.model) as loaded:
            response = client.get(f"/v1/projects/{project}/{listed.path}", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(([_index_of(item) for item in page["items"]], loaded))
        if page["next_cursor"] is None:
            return pages
        params["cursor"] = page["next_cursor"]


@pytest.fixture
def bounded(app, monkeypatch):
    """Set the page bound once the items are stored (it is also the body limit)."""
    return lambda: monkeypatch.setattr(app.state.settings, "max_body_bytes", BOUND)


@pytest.mark.parametrize("name", LISTS)
def test_a_page_of_large_items_ends_at_the_bound(client, project, bounded, name):
    listed = LISTS[name]
    for index in range(7):
        listed.add(client, project, index, "x" * ITEM_CHARACTERS)
    bounded()
    pages = _pages(client, project, listed, limit=500)
    # Every item once, in order, two a page: a third would take the page past the bound.
    assert [index for items, _ in pages for index in items] == list(range(7))
    assert [len(items) for items, _ in pages] == [2, 2, 2, 1]
    for items, loaded in pages:
        # Only the rows answered were loaded, and they held no more than the bound.
        assert len(loaded) == len(items)
        assert sum(loaded) <= BOUND


@pytest.mark.parametrize("name", LISTS)
def test_an_item_over_the_bound_has_a_page_of_its_own(client, project, bounded, name):
    listed = LISTS[name]
    sizes = [3 * BOUND, 10, 4 * BOUND, 10, 10]
    for index, size in enumerate(sizes):
        listed.add(client, project, index, "y" * size)
    bounded()
    pages = _pages(client, project, listed, limit=500)
    assert [items for items, _ in pages] == [[0], [1], [2], [3, 4]]
    # A page holds the item that is over the bound alone: no other row was loaded with it.
    assert [len(loaded) for _, loaded in pages] == [1, 1, 1, 2]


@pytest.mark.parametrize("name", LISTS)
def test_small_items_still_fill_the_limit(client, project, bounded, name):
    listed = LISTS[name]
    for index in range(5):
        listed.add(client, project, index, "z" * 10)
    bounded()
    pages = _pages(client, project, listed, limit=2)
    assert [items for items, _ in pages] == [[0, 1], [2, 3], [4]]


# How each database's full-text match shows in the SQL sent (app/memory/repository.py).
FULL_TEXT_MATCH = ("memory_items_fts MATCH", "memory_search_query(")


def test_a_search_page_runs_its_full_text_match_once(client, project, bounded):
    """The rows chosen by a search's sizes are read by their ids: the match, the costly part
    of a search of a large project, ran a second time for them."""
    for index in range(5):
        _memory_item("decisions", "decision", "timestamp")(client, project, index, "k" * 1000)
    _memory_item("decisions", "decision", "timestamp")(client, project, 5, "needle " * 100)
    _memory_item("decisions", "decision", "timestamp")(client, project, 6, "needle " * 100)
    bounded()
    sent: list[str] = []

    def record(_c: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        response = client.get(
            f"/v1/projects/{project}/memory/decisions", params={"q": "needle", "limit": 500}
        )
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert response.status_code == 200, response.text
    assert [_index_of(item) for item in response.json()["items"]] == [5, 6]
    matching = [sql for sql in sent if any(match in sql for match in FULL_TEXT_MATCH)]
    assert len(matching) == 1, matching


def _save(client: Any, project: str, padding: str) -> None:
    document = seed_save()
    document["x_padding"] = padding
    assert import_save(client, project, python_indent2(document)).status_code == 201


def _run(client: Any, project: str, padding: str) -> None:
    state = json.loads(golden_bytes("atari-state-v2.json"))
    state["x_padding"] = padding
    url = f"/v1/projects/{project}/runs/r{len(padding)}/state"
    response = client.put(url, json=state)
    assert response.status_code in (200, 201), response.text


def _feature(client: Any, project: str, padding: str) -> None:
    features = f"/v1/projects/{project}/features"
    created = client.post(features, json={"feature_id": f"f{len(padding)}"})
    assert created.status_code == 201, created.text
    patched = client.patch(f"{features}/f{len(padding)}/context", json={"x_padding": padding})
    assert patched.status_code in (200, 204), patched.text


SUMMARIES = {
    "saves": ("saves", Save, _save),
    "runs": ("runs", RunState, _run),
    "features": ("features", FeatureContext, _feature),
}


@pytest.mark.parametrize("name", SUMMARIES)
def test_a_list_of_summaries_reads_none_of_their_documents(client, project, name):
    """Saves, runs and features are listed as summaries of a few hundred bytes: a page reads
    none of their documents, each up to a body (up to the bulk limit for a save), where a page
    of 500 loaded them all."""
    path, model, add = SUMMARIES[name]
    for size in (20_000, 30_000):
        add(client, project, "p" * size)
    with _loads(model) as loaded:
        response = client.get(f"/v1/projects/{project}/{path}", params={"limit": 500})
    assert response.status_code == 200, response.text
    assert len(response.json()["items"]) == 2
    assert len(loaded) == 2 and max(loaded) < 2000, loaded
