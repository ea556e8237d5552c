"""sdd-unified's ``features/<feature>/workflow.json``: the feature's task graph.

The orchestrator reads it with ``json.load`` and writes it back with ``json.dump(workflow, f,
indent=2)`` after every change of a task's status; agents edit it too. Its shape has grown
with the tool (tasks gain ``activated``, ``auto_completed_by``, ...), and the service reads
nothing in it, so the file is kept byte for byte, never rendered again: it must only be what
the orchestrator can load, a JSON object (of tasks by id).
"""

from app.formats import jsondoc
from app.formats.errors import InvalidDocument

FILENAME = "workflow.json"


def check(raw: bytes) -> None:
    """Raise ``MalformedDocument`` unless ``raw`` is JSON, ``InvalidDocument`` unless it is
    an object."""
    if not isinstance(jsondoc.load(raw), dict):
        raise InvalidDocument(
            "workflow.json is a JSON object of tasks by id.", [("", "must be an object")]
        )
