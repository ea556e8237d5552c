"""Reviews, iteration limits and the circuit breaker (seed 003), on a checked context document.

Pure functions: the service loads the document under a row lock, calls these, and stores the
result, so that a review and its attempt count change together or not at all.
"""

from dataclasses import dataclass, field
from typing import Any

from app.core.errors import Conflict, FieldError, InvalidContent
from app.formats import feature_context

APPROVED = "APPROVED"


@dataclass(frozen=True)
class Review:
    phase: str
    outcome: str
    rejecting_agents: list[str]
    issues_count: int


@dataclass
class Change:
    """What an operation did, to report back: the phases it touched and what it added."""

    iteration_tracking: dict[str, Any]
    circuit_breaker: dict[str, Any]
    last_updated: str
    tripped: bool = False
    added: list[str] = field(default_factory=list)


def _tracking(document: dict[str, Any], phase: str, added: list[str]) -> dict[str, Any]:
    """The phase's tracking entry; a documented phase missing from the file gets the template's
    (later tool files have no ``iteration_tracking`` at all)."""
    tracking = document.get("iteration_tracking")
    if tracking is not None and phase in tracking:
        entry: dict[str, Any] = tracking[phase]
        return entry
    if phase not in feature_context.PHASE_MAX_ATTEMPTS:
        raise InvalidContent(
            f"The context tracks no phase {phase!r}.",
            errors=[FieldError("/phase", "not a phase in iteration_tracking")],
        )
    if tracking is None:
        tracking = document["iteration_tracking"] = {}
        added.append("/iteration_tracking")
    entry = tracking[phase] = feature_context.phase_tracking(
        feature_context.PHASE_MAX_ATTEMPTS[phase]
    )
    added.append(f"/iteration_tracking/{phase}")
    return entry


def _breaker(document: dict[str, Any], added: list[str]) -> dict[str, Any]:
    if "circuit_breaker" not in document:
        document["circuit_breaker"] = feature_context.circuit_breaker()
        added.append("/circuit_breaker")
    breaker: dict[str, Any] = document["circuit_breaker"]
    return breaker


def _refuse_closed_phase(phase: str, entry: dict[str, Any], breaker: dict[str, Any]) -> None:
    if breaker["intervention_required"] and breaker["blocked_task"] == phase:
        raise Conflict(
            f"The circuit breaker is tripped for {phase!r}: a human must reset it first "
            "(POST .../circuit-breaker:reset).",
            reason=breaker["reason"],
        )
    if entry["status"] == "limit_reached":
        raise Conflict(f"Phase {phase!r} has reached its limit; reset the circuit breaker first.")
    if entry["status"] == "approved":
        raise Conflict(f"Phase {phase!r} is already approved.")


def record_review(document: dict[str, Any], review: Review, timestamp: str) -> Change:
    """``attempts`` + 1 and the review appended; approval closes the phase, a rejection that
    reaches ``max_attempts`` trips the breaker."""
    added: list[str] = []
    entry = _tracking(document, review.phase, added)
    breaker = _breaker(document, added)
    _refuse_closed_phase(review.phase, entry, breaker)
    entry["attempts"] += 1
    entry["reviews"].append(
        {
            "attempt": entry["attempts"],
            "outcome": review.outcome,
            "rejecting_agents": review.rejecting_agents,
            "timestamp": timestamp,
            "issues_count": review.issues_count,
        }
    )
    tripped = False
    if review.outcome == APPROVED:
        entry["status"] = "approved"
    elif entry["attempts"] >= entry["max_attempts"]:
        entry["status"] = "limit_reached"
        breaker["intervention_required"] = True
        breaker["blocked_task"] = review.phase
        breaker["reason"] = (
            f"{review.phase} was not approved after {entry['attempts']} review attempts "
            f"(max_attempts {entry['max_attempts']}); human intervention required"
        )
        tripped = True
    document["last_updated"] = timestamp
    return Change({review.phase: entry}, breaker, timestamp, tripped, added)


def reset(document: dict[str, Any], timestamp: str) -> Change:
    """The human intervention: clear the breaker and give every blocked phase a fresh attempt
    budget (``attempts`` back to 0, ``max_attempts`` unchanged); reviews stay as they were."""
    tracking: dict[str, Any] = document.get("iteration_tracking", {})
    breaker = document.get("circuit_breaker")
    tripped = breaker is not None and breaker["intervention_required"]
    blocked_task = breaker["blocked_task"] if breaker is not None else None
    reopened = {
        phase: entry
        for phase, entry in tracking.items()
        if entry["status"] == "limit_reached"
        or (tripped and phase == blocked_task and entry["status"] != "approved")
    }
    if not tripped and not reopened:
        raise Conflict("The circuit breaker is not tripped and no phase is at its limit.")
    for entry in reopened.values():
        entry["attempts"] = 0
        entry["status"] = "active"
    if breaker is not None:
        breaker["intervention_required"] = False
        breaker["blocked_task"] = None
        breaker["reason"] = None
    document["last_updated"] = timestamp
    return Change(reopened, breaker or {}, timestamp)
