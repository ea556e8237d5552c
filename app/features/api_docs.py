"""The features routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from typing import Any

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}"
FEATURE = f"{PREFIX}/features/{{feature}}"

# Seed 003's handover note, as sdd-unified's agents append it to `handover_notes.history`.
HANDOVER: dict[str, Any] = {
    "timestamp": "2025-10-16T08:00:00Z",
    "from_agent": "sdd-architect",
    "to_agent": "sdd-pe",
    "task_completed": "design-l1",
    "message": "L1 architecture complete after 2 iterations. Microservices pattern chosen for "
    "scalability requirement R-3.2. PE should focus on inter-service contracts and event schemas.",
    "critical_points": [
        "Initial design failed due to monolithic DB - avoided in final version",
        "Event-driven communication required for loose coupling",
        "Performance budget: 100ms p95 latency",
    ],
    "artifacts_created": ["design/l1_architecture.md"],
}


def _phase(max_attempts: int) -> dict[str, Any]:
    return {"attempts": 0, "max_attempts": max_attempts, "status": "active", "reviews": []}


# Seed 003's `context.json` template, filled in for a feature in its L1 design phase.
CONTEXT: dict[str, Any] = {
    "feature_id": "checkout-flow",
    "created_at": "2025-10-16T07:00:00Z",
    "last_updated": "2025-10-16T08:00:00Z",
    "current_phase": "l1_design",
    "context_sources": {
        "requirements": {
            "file": "spec/spec.yaml",
            "schema": "sdd-unified/spec/spec.schema.json",
            "last_modified": "2025-10-16T07:30:00Z",
            "summary": "Guest and signed-in checkout with card and wallet payments.",
        },
        "l1_architecture": {
            "file": "design/l1_architecture.md",
            "status": "in_progress",
            "last_modified": None,
            "summary": "",
        },
        "l2_component_design": {
            "file": "design/l2_component_design.md",
            "status": "pending",
            "last_modified": None,
            "summary": "",
        },
        "l3_tasks": {
            "directory": "implementation/tasks/",
            "status": "pending",
            "task_count": 0,
            "last_modified": None,
        },
        "reviews": {"log_file": "review/review.log", "outcome_files": [], "latest_feedback": ""},
        "workflow_state": {
            "file": "workflow.json",
            "completed_tasks": ["define-requirements"],
            "current_tasks": ["design-l1"],
            "blocked_tasks": [],
        },
        "source_code": {"directory": "src/", "file_count": 0, "last_modified": None},
    },
    "handover_notes": {"history": [HANDOVER]},
    "iteration_tracking": {
        "design-l1": _phase(3),
        "design-l2": _phase(3),
        "design-l3": _phase(4),
    },
    "circuit_breaker": {
        "max_review_iterations": 3,
        "max_task_rework_iterations": 2,
        "intervention_required": False,
        "blocked_task": None,
        "reason": None,
    },
}

FEATURE_SUMMARY = {
    "feature_id": "checkout-flow",
    "current_phase": "l1_design",
    "intervention_required": False,
    "blocked_task": None,
    "size_bytes": 2412,
    "created_at": "2025-10-16T07:00:00Z",
    "updated_at": "2025-10-16T08:00:00Z",
}
CONTEXT_FILE = Reply("`context.json` exactly as sdd-unified writes it.", CONTEXT)

# The start of the task graph sdd-unified's orchestrator keeps in `workflow.json`.
WORKFLOW: dict[str, Any] = {
    "init": {
        "command": "sdd-feature-init --task_id=init",
        "status": "COMPLETED",
        "dependencies": [],
    },
    "define-requirements": {
        "command": "sdd-ba-define-requirements --task_id=define-requirements",
        "status": "COMPLETED",
        "dependencies": ["init"],
    },
    "design-l1": {
        "command": "sdd-architect-design-l1 --task_id=design-l1",
        "status": "PENDING",
        "dependencies": ["define-requirements"],
    },
}
WORKFLOW_SUMMARY = {
    "feature_id": "checkout-flow",
    "size_bytes": 412,
    "created_at": "2025-10-16T07:00:00Z",
    "updated_at": "2025-10-16T08:00:00Z",
}

DOCS = DomainDocs(
    Tag(
        "features",
        "sdd-unified's feature contexts: `features/<feature>/context.json` (phases, handover "
        "notes, review iterations and the circuit breaker its orchestrator reads), and the task "
        "graph beside it, `features/<feature>/workflow.json`.",
    ),
    {
        f"POST {PREFIX}/features": Operation(
            "Create an sdd-unified feature",
            {
                201: Reply(
                    "The new `context.json`, from the documented template.",
                    {**CONTEXT, "current_phase": "init", "handover_notes": {"history": []}},
                )
            },
            body={"feature_id": "checkout-flow"},
        ),
        f"GET {PREFIX}/features": Operation(
            "List a project's features",
            {200: Reply("A page of features.", {"items": [FEATURE_SUMMARY], "next_cursor": None})},
        ),
        f"GET {FEATURE}/context": Operation(
            "Download a feature's context.json", {200: CONTEXT_FILE}
        ),
        f"PUT {FEATURE}/context": Operation(
            "Store a feature's context.json",
            {200: Reply("Replaced.", FEATURE_SUMMARY), 201: Reply("Created.", FEATURE_SUMMARY)},
            body=CONTEXT,
        ),
        f"PATCH {FEATURE}/context": Operation(
            "Change a feature's context.json (merge patch)",
            {200: Reply("The new `context.json`.", {**CONTEXT, "current_phase": "l2_design"})},
            body={
                "current_phase": "l2_design",
                "context_sources": {"l1_architecture": {"status": "completed"}},
            },
        ),
        f"DELETE {FEATURE}/context": Operation(
            "Delete a feature", {204: Reply("Deleted, with its handovers.")}
        ),
        f"GET {FEATURE}/workflow": Operation(
            "Download a feature's workflow.json",
            {200: Reply("`workflow.json` exactly as it was stored.", WORKFLOW)},
        ),
        f"PUT {FEATURE}/workflow": Operation(
            "Store a feature's workflow.json",
            {200: Reply("Replaced.", WORKFLOW_SUMMARY), 201: Reply("Created.", WORKFLOW_SUMMARY)},
            body=WORKFLOW,
        ),
        f"DELETE {FEATURE}/workflow": Operation(
            "Delete a feature's workflow.json", {204: Reply("Deleted.")}
        ),
        f"POST {FEATURE}/handovers": Operation(
            "Append a handover note",
            {
                201: Reply(
                    "Appended.",
                    {
                        "feature_id": "checkout-flow",
                        "index": 1,
                        "note": HANDOVER,
                        "last_updated": "2025-10-16T08:00:01.000000+00:00",
                    },
                )
            },
            body=HANDOVER,
        ),
        f"GET {PREFIX}/handovers": Operation(
            "List handover notes across features",
            {
                200: Reply(
                    "A page of notes, newest first.",
                    {
                        "items": [{"feature_id": "checkout-flow", "index": 0, "note": HANDOVER}],
                        "next_cursor": None,
                    },
                )
            },
            parameters={"to_agent": "sdd-pe"},
        ),
        f"POST {FEATURE}/reviews": Operation(
            "Record a review of a phase",
            {201: Reply("The phase and the circuit breaker as they now stand.")},
            body={
                "phase": "design-l1",
                "outcome": "REJECTED_WITH_FEEDBACK",
                "rejecting_agents": ["sdd-pe"],
                "issues_count": 2,
            },
        ),
        f"POST {FEATURE}/circuit-breaker:reset": Operation(
            "Reset a feature's circuit breaker",
            {200: Reply("The phases re-opened and the breaker cleared.")},
        ),
    },
)
