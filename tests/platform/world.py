"""A project holding one of everything, one sample request for every API route, and a snapshot
of everything a tenant can read: what the isolation and bad-input tests compare before and after.

Routes are enumerated from the app itself, so a route added later without a sample request here
fails those tests until it gets one.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI, routing
from fastapi.routing import APIRoute

from tests.helpers import golden_bytes, python_indent2, seed_save, tar_gz

AGENT = "agent-1"
RUN = "run-1"
FEATURE = "feat-1"
ITEM = "item-1"
BEAD = "bd-1"
# In every document the world holds, so that a leak into another tenant's response shows.
MARKER = "world-marker-7f3a"

Route = tuple[str, str]  # (method, path format)


def api_routes(app: FastAPI) -> list[Route]:
    """Every (method, path) the API serves under /v1, from the app's own routing table."""
    found: set[Route] = set()
    for context in routing.iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute) and context.path_format.startswith("/v1"):
            found |= {(method, context.path_format) for method in context.methods or ()}
    return sorted(found)


def is_write(route: Route) -> bool:
    return route[0] in ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class World:
    project: str
    save_id: int
    key_id: str

    def path_values(self) -> dict[str, str]:
        return {
            "project": self.project,
            "agent": AGENT,
            "run": RUN,
            "feature": FEATURE,
            "save_id": str(self.save_id),
            "item_id": ITEM,
            "memory": "episodic",
            "name": "key-decisions.json",
            "key_id": self.key_id,
        }

    def url(self, path_format: str) -> str:
        values = self.path_values()
        return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path_format)


def _snapshot() -> dict[str, Any]:
    document = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))
    document["agent_id"] = AGENT
    document["messages"][0]["content"] = MARKER
    return document


def _context() -> dict[str, Any]:
    template = golden_bytes("sdd-context-template.json").decode()
    template = template.replace("{{feature_name}}", FEATURE)
    document: dict[str, Any] = json.loads(template.replace("{{timestamp}}", "2025-10-16T08:00:00Z"))
    document["current_phase"] = MARKER
    return document


def _context_bytes() -> bytes:
    document = _context()
    document["feature_id"] = "archived-feature"
    return python_indent2(document)


def _state() -> bytes:
    document = json.loads(golden_bytes("atari-state-seed-example.json"))
    document["active_top_level_title"] = MARKER
    return python_indent2(document)


def _item(kind: str) -> dict[str, Any]:
    sentence = "decision" if kind == "decisions" else "description"
    return {"id": ITEM, "featureId": FEATURE, sentence: MARKER, "timestamp": 1734604500000}


def _save() -> bytes:
    document = seed_save()
    document["context"]["conversation_history"][0]["content"] = MARKER
    return python_indent2(document)


def _json(body: Any) -> dict[str, Any]:
    return {"content": json.dumps(body).encode(), "headers": {"Content-Type": "application/json"}}


NO_BODY: dict[str, Any] = {}
P = "/v1/projects/{project}"

# One well-formed request for each write route: the isolation tests need requests that would
# succeed for the owner, so that a refusal is about who asks, not about what was sent.
WRITES: dict[Route, dict[str, Any]] = {
    ("POST", "/v1/admin/keys"): _json({"scopes": ["read"], "name": MARKER}),
    ("DELETE", "/v1/admin/keys/{key_id}"): NO_BODY,
    ("DELETE", P): NO_BODY,
    ("POST", P + "/saves"): {"content": _save(), "headers": {"Content-Type": "application/json"}},
    ("POST", P + "/saves/{save_id}/resume"): NO_BODY,
    ("DELETE", P + "/saves/{save_id}"): NO_BODY,
    ("POST", P + "/saves:prune"): _json({"keep_latest": 0}),
    ("PUT", P + "/agents/{agent}/working-context-snapshot"): _json(_snapshot()),
    ("DELETE", P + "/agents/{agent}/working-context-snapshot"): NO_BODY,
    ("POST", P + "/agents/{agent}/memory/{memory}"): _json(
        {"id": "ep-1", "ts": 1.5, "turn_ids": ["t1"], "summary": MARKER, "salience": 0.5}
    ),
    ("POST", P + "/agents/{agent}/restore"): _json({"system_prompt": MARKER}),
    ("PUT", P + "/runs/{run}/state"): {
        "content": _state(),
        "headers": {"Content-Type": "application/json"},
    },
    ("PATCH", P + "/runs/{run}/state"): _json({"status": "paused"}),
    ("POST", P + "/runs/{run}/state:load"): {
        "content": b"not a state " + MARKER.encode(),
        "headers": {"Content-Type": "application/octet-stream"},
    },
    ("POST", P + "/runs/{run}/iterations"): _json({"bead_id": BEAD}),
    ("POST", P + "/runs/{run}/iterations/end"): _json(
        {"bead_id": BEAD, "outcome": "completed", "session_id": "session-1"}
    ),
    ("DELETE", P + "/runs/{run}"): NO_BODY,
    ("POST", P + "/features"): _json({"feature_id": FEATURE}),
    ("PUT", P + "/features/{feature}/context"): _json(_context()),
    ("PATCH", P + "/features/{feature}/context"): _json({"current_phase": "design"}),
    ("DELETE", P + "/features/{feature}/context"): NO_BODY,
    ("PUT", P + "/features/{feature}/workflow"): _json(
        {"init": {"command": MARKER, "status": "READY", "dependencies": []}}
    ),
    ("DELETE", P + "/features/{feature}/workflow"): NO_BODY,
    ("POST", P + "/features/{feature}/handovers"): _json(
        {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": MARKER}
    ),
    ("POST", P + "/features/{feature}/reviews"): _json(
        {"phase": "design-l1", "outcome": "REJECTED", "rejecting_agents": ["x"]}
    ),
    ("POST", P + "/features/{feature}/circuit-breaker:reset"): NO_BODY,
    ("PUT", P + "/memory/running-summary"): _json({"content": MARKER, "updatedAt": 1}),
    ("PUT", P + "/memory/files/{name}"): _json([_item("decisions")]),
    ("POST", P + "/memory/maintenance"): NO_BODY,
    ("POST", P + "/archive"): {
        "content": tar_gz({"features/archived-feature/context.json": _context_bytes()}),
        "headers": {"Content-Type": "application/gzip"},
    },
}
for _kind in ("decisions", "failures", "constraints"):
    WRITES[("POST", f"{P}/memory/{_kind}")] = _json(_item(_kind))
    WRITES[("PATCH", f"{P}/memory/{_kind}/{{item_id}}")] = _json({"tags": ["x"]})
    WRITES[("DELETE", f"{P}/memory/{_kind}/{{item_id}}")] = NO_BODY

# The writes that build the world, in an order each one's prerequisites allow.
POPULATE: list[Route] = [
    ("POST", P + "/saves"),
    ("PUT", P + "/agents/{agent}/working-context-snapshot"),
    ("POST", P + "/agents/{agent}/memory/{memory}"),
    ("PUT", P + "/runs/{run}/state"),
    ("POST", P + "/runs/{run}/state:load"),
    ("PUT", P + "/runs/{run}/state"),
    ("POST", P + "/runs/{run}/iterations"),
    ("PUT", P + "/features/{feature}/context"),
    ("PUT", P + "/features/{feature}/workflow"),
    ("POST", P + "/features/{feature}/handovers"),
    ("PUT", P + "/memory/running-summary"),
    ("POST", P + "/memory/decisions"),
    ("POST", P + "/memory/failures"),
    ("POST", P + "/memory/constraints"),
]


def send(client: httpx.Client, world: World, route: Route, **overrides: Any) -> httpx.Response:
    method, path_format = route
    request = dict(WRITES.get(route, NO_BODY)) | overrides
    return client.request(method, world.url(path_format), **request)


def populate(client: httpx.Client, project: str) -> World:
    key = client.post("/v1/admin/keys", json={"scopes": ["read"]})
    assert key.status_code == 201, key.text
    world = World(project=project, save_id=0, key_id=key.json()["id"])
    for route in POPULATE:
        response = send(client, world, route)
        assert response.status_code in (200, 201), (route, response.text)
        if route == ("POST", P + "/saves"):
            world.save_id = response.json()["id"]
    return world


def readable_state(client: httpx.Client, world: World, routes: list[Route]) -> dict[str, Any]:
    """What every GET route answers the owner (both forms of the memory lists)."""
    state: dict[str, Any] = {}
    for method, path_format in routes:
        if method != "GET":
            continue
        url = world.url(path_format)
        for accept in ("application/json", "application/x-ndjson"):
            response = client.get(url, headers={"Accept": accept})
            state[f"{url} {accept}"] = (response.status_code, response.content)
    return state


def tool_calls(world: World) -> dict[str, dict[str, Any]]:
    """One well-formed call of each MCP tool on the world, as WRITES is for the routes: the
    tests compare this with the tools the server lists, so a new tool needs a sample here."""
    project = world.project
    agent = {"project": project, "agent": AGENT}
    run = {"project": project, "run": RUN}
    feature = {"project": project, "feature": FEATURE}
    return {
        "list_projects": {},
        # Before the save below, which may prune the world's (a save with every phase done).
        "resume_mdan_save": {"project": project, "save_id": world.save_id},
        "save_mdan_save": {"project": project, "save": json.loads(_save())},
        "latest_mdan_save": {"project": project},
        "list_mdan_saves": {"project": project},
        "put_working_context_snapshot": agent | {"snapshot": _snapshot()},
        "get_working_context_snapshot": agent,
        "append_agent_memory": agent
        | {
            "memory": "episodic",
            "items": [
                {"id": "ep-9", "ts": 2.5, "turn_ids": ["t9"], "summary": MARKER, "salience": 1}
            ],
        },
        "restore_agent_context": agent | {"system_prompt": MARKER},
        "start_iteration": run | {"bead_id": BEAD},
        "end_iteration": run | {"bead_id": BEAD, "outcome": "completed", "session_id": "s-9"},
        "get_run_state": run,
        "get_feature_context": feature,
        "add_handover": feature
        | {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": MARKER},
        "record_review": feature
        | {"phase": "design-l1", "outcome": "REJECTED", "rejecting_agents": ["x"]},
        "reset_circuit_breaker": feature,
        "list_handovers": {"project": project, "to_agent": "b"},
        "add_memory_item": {
            "project": project,
            "kind": "decisions",
            "item": {"featureId": FEATURE, "decision": MARKER, "rationale": "r"},
        },
        "search_memory": {"project": project, "kind": "decisions", "q": MARKER},
        "get_running_summary": {"project": project},
        "put_running_summary": {"project": project, "summary": {"content": MARKER, "updatedAt": 2}},
        "get_context_pack": {"project": project, "feature_id": FEATURE, "max_tokens": 500},
    }
