"""sdd-unified's ``features/<feature>/workflow.json``: the feature's task graph.

The orchestrator reads it with ``json.load`` and writes it back with ``json.dump(workflow, f,
indent=2)`` after every change of a task's status; agents edit it too. Its shape has grown
with the tool (tasks gain ``activated``, ``auto_completed_by``, ...), and the service reads
nothing in it, so the file is kept byte for byte: it must only be what the orchestrator can
load, a JSON object (of tasks by id). It is rendered again only when the service changed it
(a redacted secret), as the orchestrator writes it.
"""

from typing import Any

from app.formats import jsondoc
from app.formats.errors import InvalidDocument

FILENAME = "workflow.json"


def parse(raw: bytes) -> dict[str, Any]:
    """The workflow; ``MalformedDocument`` unless ``raw`` is JSON, ``InvalidDocument`` unless
    it is an object."""
    document = jsondoc.load(raw)
    if not isinstance(document, dict):
        raise InvalidDocument(
            "workflow.json is a JSON object of tasks by id.", [("", "must be an object")]
        )
    return document


def render(document: dict[str, Any]) -> bytes:
    return jsondoc.dumps_indent2(document)
