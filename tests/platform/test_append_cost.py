"""An append costs the same whatever the project, feature, run or agent already holds (issue
20), measured without a clock: the SQL statements an append runs, the rows its SELECTs return
(each run again once the append is done) and the bytes it sends to the database are the same
next to 10 items as next to 1,000. Reading every id, note or bead, or writing the whole
document again, would show in the rows or the bytes."""

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Engine, event

from app.formats import atari_state, feature_context
from tests.helpers import golden_bytes, raw_trace

SMALL, LARGE = 10, 1_000
# What may differ between the two sizes: numbers written with more digits (an iteration, a
# position, a size), never anything that grows with the document.
BYTES_SLACK = 64
JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Cost:
    statements: list[str]
    rows: int
    bytes_sent: int


def _size(value: Any) -> int:
    if isinstance(value, bytes | str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(item) for item in value.values())
    if isinstance(value, list | tuple):
        return sum(_size(item) for item in value)
    return 8


@contextmanager
def _recorded(app: FastAPI) -> Iterator[list[tuple[str, Any, bool]]]:
    """Every statement the app's engines run, its parameters, and whether it ran many."""
    recorded: list[tuple[str, Any, bool]] = []

    def record(_c: Any, _cur: Any, statement: str, parameters: Any, _ctx: Any, many: bool) -> None:
        recorded.append((statement, parameters, many))

    engines: list[Engine] = list(app.state.database.engines().values())
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield recorded
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


def _is_key_look_up(statement: str) -> bool:
    """The key's look-up, which a request makes only once its key has left the cache (5 s,
    counted from the look-up): in one of two appends compared, but not the other, when the
    test runs slowly."""
    return "FROM api_keys" in statement


def _cost(app: FastAPI, append: Callable[[], httpx.Response]) -> Cost:
    with _recorded(app) as everything:
        response = append()
    assert response.status_code in (200, 201), response.text
    recorded = [run for run in everything if not _is_key_look_up(run[0])]
    rows = 0
    sent = 0
    with app.state.database.writer.connect() as connection:
        for statement, parameters, many in recorded:
            if statement.lstrip().upper().startswith(("SELECT", "WITH")) and not many:
                rows += len(connection.exec_driver_sql(statement, parameters).all())
            else:
                sent += _size(parameters)
        connection.rollback()
    return Cost([statement for statement, _p, _m in recorded], rows, sent)


def _assert_flat(small: Cost, large: Cost) -> None:
    assert large.statements == small.statements
    assert large.rows == small.rows
    assert abs(large.bytes_sent - small.bytes_sent) <= BYTES_SLACK, (small, large)


def _project() -> str:
    return "cost-" + uuid.uuid4().hex[:12]


# Each case: a project holding ``count`` items, then one append to it.


def _feature(client: httpx.Client, count: int) -> Callable[[], httpx.Response]:
    project = _project()
    document = feature_context.template("f", "2026-01-01T00:00:00+00:00")
    document["handover_notes"]["history"] = [
        {"timestamp": "2026-01-01T00:00:00+00:00", "from_agent": "a", "to_agent": "b", "n": n}
        for n in range(count)
    ]
    url = f"/v1/projects/{project}/features/f"
    stored = client.put(f"{url}/context", content=feature_context.render(document), headers=JSON)
    assert stored.status_code == 201, stored.text
    # A first append: a context is appended to as its parts from here on either way.
    note = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "next"}
    assert client.post(f"{url}/handovers", json=note).status_code == 201
    return lambda: client.post(f"{url}/handovers", json=note)


def _review(client: httpx.Client, count: int) -> Callable[[], httpx.Response]:
    handover = _feature(client, count)
    url = handover().url.path.removesuffix("/handovers")
    review = {"phase": "design-l1", "outcome": "REJECTED_WITH_FEEDBACK", "issues_count": 1}
    return lambda: client.post(f"{url}/reviews", json=review)


def _run(client: httpx.Client, count: int) -> str:
    project = _project()
    state = atari_state.parse(golden_bytes("atari-state-v2.json"))[0]
    for n in range(count):
        bead = f"bd-{n:05d}"
        state["history"][bead] = {
            "id": bead,
            "status": "completed",
            "attempts": 1,
            "last_attempt": state["updated_at"],
        }
    url = f"/v1/projects/{project}/runs/r"
    stored = client.put(f"{url}/state", content=atari_state.render(state), headers=JSON)
    assert stored.status_code == 201, stored.text
    return url


def _iteration_start(client: httpx.Client, count: int) -> Callable[[], httpx.Response]:
    url = _run(client, count)
    beads = iter(range(10**6))
    # A new bead each time, in the middle of the sorted history, and an existing one.
    return lambda: client.post(f"{url}/iterations", json={"bead_id": f"bd-{next(beads):05d}x"})


def _iteration_end(client: httpx.Client, count: int) -> Callable[[], httpx.Response]:
    url = _run(client, count)
    end = {"bead_id": "bd-00003", "outcome": "failed", "error": "tests failed", "cost": 0.5}
    return lambda: client.post(f"{url}/iterations/end", json=end)


def _decisions(client: httpx.Client, count: int, with_id: bool) -> Callable[[], httpx.Response]:
    project = _project()
    [template] = json.loads(golden_bytes("memory-key-decisions.json"))
    items = [{**template, "id": f"dec-{n + 1:03d}"} for n in range(count)]
    url = f"/v1/projects/{project}/memory"
    stored = client.put(f"{url}/files/key-decisions.json", json=items)
    assert stored.status_code in (200, 201), stored.text
    numbers = iter(range(10**6))

    def append() -> httpx.Response:
        item = {k: v for k, v in template.items() if k != "id"}
        if with_id:
            item["id"] = f"dec-x{next(numbers)}"
        return client.post(f"{url}/decisions", json=item)

    return append


def _agent_memory(client: httpx.Client, count: int) -> Callable[[], httpx.Response]:
    url = f"/v1/projects/{_project()}/agents/agent/memory/raw-traces"
    stored = client.post(url, json=[raw_trace(f"t{n}", 1) for n in range(count)])
    assert stored.status_code == 201, stored.text
    turns = iter(range(10**6))
    return lambda: client.post(url, json=[raw_trace(f"new{next(turns)}", 1)])


CASES: dict[str, Callable[[httpx.Client, int], Callable[[], httpx.Response]]] = {
    "handover": _feature,
    "review": _review,
    "iteration start": _iteration_start,
    "iteration end": _iteration_end,
    "decision without id": lambda client, count: _decisions(client, count, with_id=False),
    "decision with id": lambda client, count: _decisions(client, count, with_id=True),
    "agent memory line": _agent_memory,
}


@pytest.mark.parametrize("case", CASES)
def test_an_append_costs_the_same_next_to_ten_items_as_next_to_a_thousand(app, client, case):
    small, large = CASES[case](client, SMALL), CASES[case](client, LARGE)
    # The second append of each: the first may set up what later ones reuse.
    small(), large()
    _assert_flat(_cost(app, small), _cost(app, large))


@pytest.mark.parametrize("case", CASES)
def test_an_append_updates_each_table_once(app, client, case):
    """A change to a stored row is one UPDATE (``ProjectScopedRepository.store``), whose values
    the row then holds as stored: the commit's flush has nothing left to write again."""
    append = CASES[case](client, SMALL)
    append()
    updates = [
        statement.split()[1]
        for statement in _cost(app, append).statements
        if statement.lstrip().upper().startswith("UPDATE")
    ]
    assert len(updates) == len(set(updates)), updates


@pytest.mark.parametrize("case", ["handover", "iteration start", "iteration end"])
def test_an_append_reads_its_row_and_what_it_needs_with_it_in_one_statement(app, client, case):
    """The row a handover or an iteration changes, locked, and what the append needs beside
    it (the next note's position, the bead's stored entry) come in one SELECT: on PostgreSQL
    each statement is a round trip of its own (README, "Where the time goes")."""
    append = CASES[case](client, SMALL)
    append()
    selects = [
        statement
        for statement in _cost(app, append).statements
        if statement.lstrip().upper().startswith("SELECT")
    ]
    assert len(selects) == 1, selects


def test_an_appended_document_is_whole_its_size_true_and_its_tag_strong(client):
    append = _feature(client, SMALL)
    response = append()
    url = response.url.path.removesuffix("/handovers")
    exported = client.get(f"{url}/context")
    history = json.loads(exported.content)["handover_notes"]["history"]
    assert len(history) == SMALL + 2 and history[-1]["message"] == "next"
    assert exported.content == feature_context.render(json.loads(exported.content))
    project = url.split("/")[3]
    [listed] = client.get(f"/v1/projects/{project}/features").json()["items"]
    assert listed["size_bytes"] == len(exported.content)
    # The tag an append gives is the document's, and a strong one: conditional requests hold.
    etag = response.headers["etag"]
    assert exported.headers["etag"] == etag and not etag.startswith("W/")
    assert client.get(f"{url}/context", headers={"If-None-Match": etag}).status_code == 304
    note = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"}
    again = client.post(f"{url}/handovers", json=note, headers={"If-Match": etag})
    assert again.status_code == 201 and again.headers["etag"] != etag
    stale = client.post(f"{url}/handovers", json=note, headers={"If-Match": etag})
    assert stale.status_code == 412


SECRET = "sk-ant-api03-Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5"


def test_what_an_append_adds_is_redacted_where_it_stands_in_the_document(client):
    """Only the appended part is redacted, at the pointer the whole document's redaction
    would give; the file is what redacting the whole document gives."""
    append = _feature(client, SMALL)
    url = append().url.path.removesuffix("/handovers")
    note = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": f"k {SECRET}"}
    response = client.post(f"{url}/handovers", json=note)
    index = response.json()["index"]
    assert json.loads(response.headers["Redactions"])["sites"] == [
        {"path": f"/handover_notes/history/{index}/message", "kind": "api_key", "count": 1}
    ]
    exported = client.get(f"{url}/context").content
    assert SECRET not in exported.decode()
    history = json.loads(exported)["handover_notes"]["history"]
    assert history[index]["message"] == "k [REDACTED:api_key]"
    assert exported == feature_context.render(json.loads(exported))

    run = _run(client, SMALL)
    end = {"bead_id": "bd-00003", "outcome": "failed", "error": f"e {SECRET}"}
    response = client.post(f"{run}/iterations/end", json=end)
    assert json.loads(response.headers["Redactions"])["sites"] == [
        {"path": "/history/bd-00003/last_error", "kind": "api_key", "count": 1}
    ]
    state = client.get(f"{run}/state").content
    assert atari_state.parse(state)[0]["history"]["bd-00003"]["last_error"] == (
        "e [REDACTED:api_key]"
    )


def test_a_bead_id_that_holds_a_secret_is_stored_as_the_whole_document_redacts_it(client):
    """Its key is redacted, and numbered against the keys that redact alike: the state is
    stored whole then, as it was before it was kept as its parts."""
    run = _run(client, SMALL)
    before = len(atari_state.parse(client.get(f"{run}/state").content)[0]["history"])
    for _ in range(2):
        response = client.post(f"{run}/iterations", json={"bead_id": SECRET})
        assert response.status_code == 200, response.text
    state = client.get(f"{run}/state").content
    assert SECRET not in state.decode()
    history = atari_state.parse(state)[0]["history"]
    assert {"[REDACTED:api_key]", "[REDACTED:api_key]#2"} <= set(history)
    assert len(history) == before + 2
    # Appends go on as parts from there.
    assert client.post(f"{run}/iterations", json={"bead_id": "bd-after"}).status_code == 200
    after = client.get(f"{run}/state").content
    assert after == atari_state.render(atari_state.parse(after)[0])
