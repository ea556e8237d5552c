"""sdd-unified feature contexts (seed 003): ``features/<feature>/context.json``.

The tool writes the file with ``json.dump(context, f, indent=2)`` and its timestamps with
``datetime.now(timezone.utc).isoformat()`` (``2026-02-22T10:35:48.802674+00:00``). Its later
files add fields the seed does not document (``execution_log``, ``risk_tier``, ``policy_gate``,
``review_routing``, ``runtime``, ...) and leave out some it does (``iteration_tracking``,
``context_sources``): only ``feature_id`` is required, a documented field that is present must
have its documented shape, and everything else is kept as it is. Nothing is filled in or
rewritten here: a context is accepted as written or refused with every fault named.

``feature_id`` is data, not the feature's name: the tool names a feature by its directory
(``features/feature-002-password-reset/``) and keeps the ``feature_id`` the context was created
with (seed 003's template holds ``{{feature_name}}``, e.g. ``password-reset``); only a context
the orchestrator creates itself gets the directory's name.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from app.formats import jsondoc, parts
from app.formats.errors import Faults, InvalidDocument
from app.formats.timestamps import parse_iso8601

FILENAME = "context.json"
# The documented phases and their template budgets; other phases exist only if a file has them.
PHASE_MAX_ATTEMPTS = {"design-l1": 3, "design-l2": 3, "design-l3": 4}
PHASE_STATUSES = ("active", "limit_reached", "approved")
SOURCE_STATUSES = ("pending", "in_progress", "completed")
# What the tool itself writes for a review outcome (orchestrator/main.py reads the same).
ReviewOutcome = Literal["APPROVED", "REJECTED_WITH_FEEDBACK", "REJECTED"]
APPROVED: ReviewOutcome = "APPROVED"
# Agent names are indexed columns; a btree entry has a size limit, a name does not need one.
MAX_AGENT_NAME = 256
# A review names the agents that rejected the work: the tool's pipeline has half a dozen. A
# review is kept in the context's head, which every later review reads and writes whole.
MAX_REJECTING_AGENTS = 100


def tool_timestamp(moment: datetime) -> str:
    """A timestamp as the tool writes it: ``isoformat()`` of an aware UTC datetime."""
    return moment.astimezone(UTC).isoformat()


def phase_tracking(max_attempts: int) -> dict[str, Any]:
    return {"attempts": 0, "max_attempts": max_attempts, "status": "active", "reviews": []}


def circuit_breaker() -> dict[str, Any]:
    return {
        "max_review_iterations": 3,
        "max_task_rework_iterations": 2,
        "intervention_required": False,
        "blocked_task": None,
        "reason": None,
    }


def _design_source(file: str) -> dict[str, Any]:
    return {"file": file, "status": "pending", "last_modified": None, "summary": ""}


def template(feature_id: str, timestamp: str) -> dict[str, Any]:
    """The documented template, instantiated."""
    return {
        "feature_id": feature_id,
        "created_at": timestamp,
        "last_updated": timestamp,
        "current_phase": "init",
        "context_sources": {
            "requirements": {
                "file": "spec/spec.yaml",
                "schema": "sdd-unified/spec/spec.schema.json",
                "last_modified": None,
                "summary": "",
            },
            "l1_architecture": _design_source("design/l1_architecture.md"),
            "l2_component_design": _design_source("design/l2_component_design.md"),
            "l3_tasks": {
                "directory": "implementation/tasks/",
                "status": "pending",
                "task_count": 0,
                "last_modified": None,
            },
            "reviews": {
                "log_file": "review/review.log",
                "outcome_files": [],
                "latest_feedback": "",
            },
            "workflow_state": {
                "file": "workflow.json",
                "completed_tasks": [],
                "current_tasks": [],
                "blocked_tasks": [],
            },
            "source_code": {"directory": "src/", "file_count": 0, "last_modified": None},
        },
        "handover_notes": {"history": []},
        "iteration_tracking": {
            phase: phase_tracking(budget) for phase, budget in PHASE_MAX_ATTEMPTS.items()
        },
        "circuit_breaker": circuit_breaker(),
    }


# --- validation -------------------------------------------------------------------------------

Check = Callable[[Any], bool]


def is_count(value: Any) -> bool:
    """A non-negative integer (never a bool), of any size: Python's int has no bound and no
    column holds a count."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_column_text(value: Any) -> bool:
    # Phase, task and agent names become indexed columns that lists filter on; NUL or a lone
    # surrogate (valid JSON, storable by neither database) makes no sense in a name, so the
    # document is refused (422) rather than stored with a column that differs from it.
    return isinstance(value, str) and jsondoc.is_storable(value)


def _is_optional_column_text(value: Any) -> bool:
    return value is None or _is_column_text(value)


def _is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_agent_name(value: Any) -> bool:
    return _is_column_text(value) and len(value) <= MAX_AGENT_NAME


def _is_timestamp(value: Any) -> bool:
    return parse_iso8601(value) is not None


def _one_of(*allowed: str) -> Check:
    return lambda value: value in allowed


AGENT_NAME = f"a string of at most {MAX_AGENT_NAME} characters, without NUL or lone surrogates"
COLUMN_TEXT = "a string without NUL characters or lone surrogates"
HANDOVER_FIELDS: dict[str, tuple[bool, Check, str]] = {
    # name: (required, check, what is expected)
    "timestamp": (True, _is_timestamp, "an ISO 8601 timestamp"),
    "from_agent": (True, _is_agent_name, AGENT_NAME),
    "to_agent": (True, _is_agent_name, AGENT_NAME),
    "task_completed": (False, _is_string, "a string"),
    "message": (False, _is_string, "a string"),
    "critical_points": (False, _is_string_list, "an array of strings"),
    "artifacts_created": (False, _is_string_list, "an array of strings"),
}
PHASE_FIELDS: dict[str, tuple[bool, Check, str]] = {
    "attempts": (True, is_count, "a non-negative integer"),
    "max_attempts": (True, is_count, "a non-negative integer"),
    "status": (True, _one_of(*PHASE_STATUSES), "one of " + ", ".join(PHASE_STATUSES)),
    "reviews": (True, lambda value: isinstance(value, list), "an array"),
}
BREAKER_FIELDS: dict[str, tuple[bool, Check, str]] = {
    "max_review_iterations": (True, is_count, "a non-negative integer"),
    "max_task_rework_iterations": (True, is_count, "a non-negative integer"),
    "intervention_required": (True, lambda value: isinstance(value, bool), "true or false"),
    "blocked_task": (True, _is_optional_column_text, COLUMN_TEXT + ", or null"),
    "reason": (True, lambda value: value is None or isinstance(value, str), "a string or null"),
}


class _Faults(Faults):
    """What is wrong with a feature context, with the checks each part takes."""

    def object_at(self, value: Any, *path: str | int) -> bool:
        if isinstance(value, dict):
            return True
        self.append((jsondoc.pointer(*path), "must be an object"))
        return False

    def fields(
        self, node: dict[str, Any], spec: dict[str, tuple[bool, Check, str]], *path: str | int
    ) -> None:
        for name, (required, check, expected) in spec.items():
            where = jsondoc.pointer(*path, name)
            if name not in node:
                if required:
                    self.append((where, "is required"))
            elif not check(node[name]):
                self.append((where, f"must be {expected}"))


def _check_sources(faults: _Faults, sources: Any) -> None:
    if not faults.object_at(sources, "context_sources"):
        return
    for name, source in sources.items():
        if not faults.object_at(source, "context_sources", name):
            continue
        if "status" in source and source["status"] not in SOURCE_STATUSES:
            faults.append(
                (
                    jsondoc.pointer("context_sources", name, "status"),
                    "must be one of " + ", ".join(SOURCE_STATUSES),
                )
            )


def _check_handovers(faults: _Faults, notes: Any) -> None:
    if not faults.object_at(notes, "handover_notes") or "history" not in notes:
        return
    history = notes["history"]
    if not isinstance(history, list):
        faults.append(("/handover_notes/history", "must be an array"))
        return
    for index, note in enumerate(history):
        if faults.object_at(note, "handover_notes", "history", index):
            faults.fields(note, HANDOVER_FIELDS, "handover_notes", "history", index)


def _check_tracking(faults: _Faults, tracking: Any) -> None:
    if not faults.object_at(tracking, "iteration_tracking"):
        return
    for phase, entry in tracking.items():
        if faults.object_at(entry, "iteration_tracking", phase):
            faults.fields(entry, PHASE_FIELDS, "iteration_tracking", phase)


def check(document: Any) -> None:
    """Raise ``InvalidDocument`` naming every fault, unless ``document`` is a valid context."""
    faults = _Faults()
    if not faults.object_at(document):
        raise InvalidDocument("A feature context is a JSON object.", faults)
    if "feature_id" not in document:
        faults.append(("/feature_id", "is required"))
    elif not isinstance(document["feature_id"], str):
        faults.append(("/feature_id", "must be a string"))
    for name in ("created_at", "last_updated"):
        if name in document and not isinstance(document[name], str):
            faults.append((jsondoc.pointer(name), "must be a string"))
    if "current_phase" in document and not _is_column_text(document["current_phase"]):
        faults.append(("/current_phase", "must be " + COLUMN_TEXT))
    if "context_sources" in document:
        _check_sources(faults, document["context_sources"])
    if "handover_notes" in document:
        _check_handovers(faults, document["handover_notes"])
    if "iteration_tracking" in document:
        _check_tracking(faults, document["iteration_tracking"])
    if "circuit_breaker" in document and faults.object_at(
        document["circuit_breaker"], "circuit_breaker"
    ):
        faults.fields(document["circuit_breaker"], BREAKER_FIELDS, "circuit_breaker")
    if faults:
        raise InvalidDocument("The document is not a valid sdd-unified context.json.", faults)


def parse(raw: bytes) -> dict[str, Any]:
    document = jsondoc.load(raw)
    check(document)
    result: dict[str, Any] = document
    return result


def render(document: dict[str, Any]) -> bytes:
    return jsondoc.dumps_indent2(document)


def note_part(note: dict[str, Any]) -> bytes:
    """A handover note as a member of ``handover_notes.history`` (``parts.join``)."""
    return jsondoc.dumps_indent2(note)


def split(document: dict[str, Any]) -> tuple[parts.Head, list[bytes]]:
    """A checked context as its head and its handover notes (``parts.join`` of the two is
    ``render(document)``); a context without ``handover_notes.history`` is all head."""
    notes = document.get("handover_notes")
    if not isinstance(notes, dict) or "history" not in notes:
        return parts.Head(render(document), None), []
    history: list[dict[str, Any]] = notes["history"]

    def render_with(marker: str) -> bytes:
        # Copies that keep every key in its place: the document itself is left as it is.
        return render({**document, "handover_notes": {**notes, "history": marker}})

    head = parts.hole(render_with, lambda text: json.dumps(text).encode("ascii"), b"[]")
    return head, [note_part(note) for note in history]


@dataclass(frozen=True)
class Handover:
    """One handover note, with what the index needs, read from a checked document."""

    position: int
    timestamp: datetime
    from_agent: str
    to_agent: str
    note: dict[str, Any]


def handover(position: int, note: dict[str, Any]) -> Handover:
    timestamp = parse_iso8601(note["timestamp"])
    assert timestamp is not None, "handover() takes a note that check() has accepted"
    return Handover(position, timestamp, note["from_agent"], note["to_agent"], note)


def handovers(document: dict[str, Any]) -> list[Handover]:
    history = document.get("handover_notes", {}).get("history", [])
    return [handover(position, note) for position, note in enumerate(history)]
