"""What Python's ``json`` writes and strict JSON has not (NaN, Infinity, -Infinity) or few
readers hold (integers past 64 bits) is kept exactly in every format a Python writer writes:
autobyteus snapshots and memory lines, sdd-unified contexts, Context Agent files (MDAN saves:
tests/saves/test_fidelity.py). atari is not among them: its Go encoder refuses NaN.

Each document is written here the way its writer writes it: ``json.dumps`` with that
writer's arguments.
"""

import json
import math
from typing import Any

from tests.helpers import golden_bytes, tar_gz, untar

BIG = 123456789012345678901234567890
ODD_VALUES = [float("nan"), float("inf"), float("-inf"), BIG, -BIG]


def _strict(text: str) -> Any:
    """Parse as a strict JSON reader does: NaN or Infinity in the text is an error."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} in a JSON answer")

    return json.loads(text, parse_constant=refuse)


def test_a_snapshot_keeps_nan_and_large_integers(client, project):
    document = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))
    agent = document["agent_id"]
    document["epoch_id"] = 2**64
    document["last_compaction_ts"] = float("nan")
    document["x_scores"] = ODD_VALUES
    raw = json.dumps(document).encode()  # autobyteus: json.dump(payload, handle)
    url = f"/v1/projects/{project}/agents/{agent}/working-context-snapshot"
    stored = client.put(url, content=raw, headers={"Content-Type": "application/json"})
    assert stored.status_code == 201, stored.text
    assert stored.json()["epoch_id"] == 2**64
    assert client.get(url).content == raw


def test_memory_lines_keep_nan_and_large_integers(client, project):
    trace = {
        "id": "rt_1",
        "ts": float("nan"),
        "turn_id": "turn_0001",
        "seq": 2**64,
        "trace_type": "user",
        "content": "hello",
        "source_event": "LLMUserMessageReadyEvent",
        "x_scores": ODD_VALUES,
    }
    line = json.dumps(trace) + "\n"  # autobyteus: json.dumps(item.to_dict()) + "\n"
    url = f"/v1/projects/{project}/agents/a1/memory/raw-traces"
    appended = client.post(
        url, content=line.encode(), headers={"Content-Type": "application/x-ndjson"}
    )
    assert appended.status_code == 201, appended.text
    exported = client.get(url, headers={"Accept": "application/x-ndjson"})
    assert exported.content == line.encode()
    # The service's own JSON answer stays JSON: NaN and the infinities are null there.
    [item] = _strict(client.get(url).text)["items"]
    assert item["ts"] is None and item["seq"] == 2**64
    assert item["x_scores"] == [None, None, None, BIG, -BIG]


def test_a_feature_context_keeps_nan_and_large_counts(client, project):
    document = json.loads(golden_bytes("sdd-context-template.json"))
    document["feature_id"] = "f1"
    document["iteration_tracking"]["design-l1"]["attempts"] = 2**64
    document["iteration_tracking"]["design-l1"]["max_attempts"] = 2**65
    document["risk_score"] = ODD_VALUES
    raw = json.dumps(document, indent=2).encode()  # sdd-unified: json.dump(context, f, indent=2)
    url = f"/v1/projects/{project}/features/f1"
    stored = client.put(f"{url}/context", content=raw, headers={"Content-Type": "application/json"})
    assert stored.status_code == 201, stored.text
    assert client.get(f"{url}/context").content == raw
    review = {"phase": "design-l1", "outcome": "REJECTED_WITH_FEEDBACK", "issues_count": 1}
    reviewed = client.post(f"{url}/reviews", json=review | {"rejecting_agents": ["qa"]})
    assert reviewed.status_code == 201, reviewed.text
    assert reviewed.json()["iteration_tracking"]["design-l1"]["attempts"] == 2**64 + 1


def test_project_memory_files_keep_nan_and_large_integers(client, project):
    decisions = [
        {
            "id": "dec-001",
            "decision": "Use SQL Server",
            "timestamp": 2**70,
            "confidence": float("nan"),
            "x_scores": ODD_VALUES,
        },
        {"id": "dec-002", "decision": "Use Blazor", "timestamp": 1705314225000},
    ]
    raw = json.dumps(decisions, indent=2).encode()  # the Context Agent: json.dumps(doc, indent=2)
    url = f"/v1/projects/{project}/memory/files/key-decisions.json"
    stored = client.put(url, content=raw, headers={"Content-Type": "application/json"})
    assert stored.status_code == 200, stored.text
    assert client.get(url).content == raw
    # The column holds the time clamped to 64 bits: it still sorts as the newest.
    listed = _strict(client.get(f"/v1/projects/{project}/memory/decisions").text)["items"]
    assert [item["id"] for item in listed] == ["dec-001", "dec-002"]
    assert listed[0]["timestamp"] == 2**63 - 1
    assert listed[0]["item"]["timestamp"] == 2**70
    assert listed[0]["item"]["confidence"] is None


def test_the_archive_gives_every_such_file_back(client, project):
    snapshot = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))
    snapshot["x_scores"] = ODD_VALUES
    context = json.loads(golden_bytes("sdd-context-template.json"))
    context["feature_id"] = "f1"
    context["risk_score"] = ODD_VALUES
    summary = {"content": "Summary", "tokenCount": 2**64, "x_ratio": float("nan")}
    files = {
        f"memory/agents/{snapshot['agent_id']}/working_context_snapshot.json": json.dumps(
            snapshot
        ).encode(),
        "features/f1/context.json": json.dumps(context, indent=2).encode(),
        ".autonomous/context/running-summary.json": json.dumps(summary, indent=2).encode(),
    }
    report = client.post(
        f"/v1/projects/{project}/archive",
        content=tar_gz(files),
        headers={"Content-Type": "application/gzip"},
    ).json()
    assert report["refused"] == [], report["refused"]
    exported = untar(client.get(f"/v1/projects/{project}/archive").content)
    assert {path: exported[path] for path in files} == files
    assert math.isnan(json.loads(exported[".autonomous/context/running-summary.json"])["x_ratio"])
