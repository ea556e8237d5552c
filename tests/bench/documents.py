"""The bodies the benchmark sends and the rows it seeds: realistic, deterministic, sized."""

import json
import random
from typing import Any

# Prose and code as agents write them; a few lines hold something the redaction must catch.
_TEXT = (
    "the service stores each agent state file exactly and returns it byte for byte while "
    "handlers validate inputs migrations run once tokens counted cached decisions recorded "
    "failures ranked by relevance constraints kept active until they expire"
)
_WORDS = tuple(_TEXT.split())
_CODE = 'def handler(request):\n    return {"status": "ok", "items": [1, 2, 3]}\n'
_SECRETS = (
    "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
    "Authorization: Bearer abcdefghijklmnop.qrstuvwx",
    "password = hunter2hunter2",
)


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def mdan_save(size_bytes: int, seed: int = 0) -> bytes:
    """A valid MDAN-AUTO save of about ``size_bytes``: conversation turns, artifacts with
    code, decisions; one message in 500 carries a secret."""
    rng = random.Random(seed)
    history: list[dict[str, Any]] = []
    document: dict[str, Any] = {
        "version": "1.0",
        "mode": "auto",
        "timestamp": "2024-01-15T10:23:45Z",
        "project": {"name": "bench", "description": "benchmark save", "tech_stack": {}},
        "phases": {
            "current": "IMPLEMENT",
            "completed": ["LOAD", "DISCOVER"],
            "status": {"LOAD": "complete", "DISCOVER": "complete", "IMPLEMENT": "in_progress"},
        },
        "context": {
            "token_usage": {"total": 102400, "limit": 128000, "percentage": 0.8},
            "conversation_history": history,
            "artifacts": {},
            "decisions": [],
        },
        "debates": [],
        "errors": [],
        "quality_gates": {},
        "configuration": {"token_limit": 128000, "save_threshold": 0.8},
        "metadata": {
            "created_at": "2024-01-15T10:00:00Z",
            "updated_at": "2024-01-15T10:23:45Z",
            "save_count": 3,
            "resume_count": 0,
        },
    }
    approximate = 2000
    number = 0
    while approximate < size_bytes:
        number += 1
        content = _prose(rng, 60)
        if number % 7 == 0:
            content += "\n```python\n" + _CODE * 3 + "```\n"
        if number % 500 == 0:
            content += "\n" + _SECRETS[number // 500 % len(_SECRETS)]
        role = ("user", "assistant")[number % 2]
        history.append({"role": role, "content": content, "timestamp": "2024-01-15T10:00:01Z"})
        approximate += len(content) + 110
        if number % 100 == 0:
            document["context"]["artifacts"][f"file{number}"] = {
                "file": f"src/file{number}.py",
                "content": _CODE * 20,
            }
            approximate += len(_CODE) * 20 + 60
    return json.dumps(document, indent=2).encode()


def decision_body() -> str:
    """A key decision with an id unique to each request (``{n}``)."""
    return json.dumps(
        {
            "id": "dec-{n}",
            "timestamp": 1705312800000,
            "featureId": "feature-007",
            "category": "architecture",
            "decision": "Store document bytes, never JSONB",
            "rationale": "Key order and duplicates must survive the round trip",
            "impact": ["saves", "exports"],
        }
    )


def handover_body() -> str:
    return json.dumps(
        {
            "from_agent": "sdd-architect",
            "to_agent": "sdd-developer",
            "task_completed": "L2 design",
            "message": "Design approved; start with the repository layer",
            "critical_points": ["one writer on SQLite", "bytes, not JSONB"],
            "artifacts_created": ["design.md"],
        }
    )


def iteration_body(bead: str) -> str:
    return json.dumps({"bead_id": bead})


# Rows seeded straight into the tables (scaling runs).


def memory_item_document(kind: str, number: int) -> dict[str, Any]:
    feature = f"feature-{number % 200:03d}"
    text = f"{_WORDS[number % len(_WORDS)]} {_WORDS[(number * 7) % len(_WORDS)]} item {number}"
    if kind == "decision":
        return {
            "id": f"dec-{number:07d}",
            "timestamp": 1_600_000_000_000 + number,
            "featureId": feature,
            "category": "architecture",
            "decision": f"Decision {number}: {text}",
            "rationale": "because " + text,
            "impact": ["saves"],
        }
    if kind == "failure":
        return {
            "id": f"fail-{number:07d}",
            "timestamp": 1_600_000_000_000 + number,
            "featureId": feature,
            "severity": "medium",
            "description": f"Failure {number}: {text}",
            "rootCause": "a race in " + text,
            "resolution": "",
            "prevention": "lock first",
        }
    return {
        "id": f"con-{number:07d}",
        "addedAt": 1_600_000_000_000 + number,
        "type": "technical",
        "description": f"Constraint {number}: {text}",
        "expiresAt": None,
    }


def raw_trace(number: int, per_turn: int = 4) -> dict[str, Any]:
    turn = number // per_turn
    return {
        "id": f"rt-{number}",
        "ts": 1_700_000_000.0 + number,
        "turn_id": f"turn-{turn}",
        "seq": number % per_turn,
        "trace_type": ("user", "assistant", "tool_call", "tool_result")[number % per_turn],
        "content": f"trace {number}: "
        + " ".join(_WORDS[(number + i) % len(_WORDS)] for i in range(12)),
        "source_event": "bench",
    }


def episodic(number: int) -> dict[str, Any]:
    return {
        "id": f"ep-{number}",
        "ts": 1_700_000_000.0 + number,
        "turn_ids": [f"turn-{number}"],
        "summary": f"episode {number}: "
        + " ".join(_WORDS[(number + i) % len(_WORDS)] for i in range(20)),
        "salience": 0.5,
    }


def semantic(number: int) -> dict[str, Any]:
    return {
        "id": f"sem-{number}",
        "ts": 1_700_000_000.0 + number,
        "fact": f"fact {number}: "
        + " ".join(_WORDS[(number + i) % len(_WORDS)] for i in range(10)),
        "confidence": 0.9,
        "salience": 0.5,
    }
