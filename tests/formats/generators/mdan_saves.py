"""Writes the MDAN-AUTO saves of the golden workspace as MDAN-AUTO itself writes them.

MDAN-AUTO's writer (seed 000, "Example Usage") is::

    timestamp = int(datetime.now().timestamp())
    filename = f"/tmp/mdan-save-{timestamp}.json"
    with open(filename, 'w') as f:
        json.dump(state, f, indent=2)

so each file here is ``json.dump(state, f, indent=2)`` of a state, named after the second it
was saved at (the seed's own example is named 1705310400, though its ``timestamp`` field says
10:23:45, 1705314225: the name is the writer's clock, not the field). Python's ``json`` writes
integers of any size and NaN / Infinity (``allow_nan=True`` is its default), and escapes every
non-ASCII character (``ensure_ascii=True``).

Not part of ``make test``; run it from the repository's root to write the files again:
``python tests/formats/generators/mdan_saves.py``.
"""

import copy
import json
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
TARGET = GOLDEN / "workspace" / "mdan"
# A token of the shape of an OpenAI project key; made up, never valid anywhere.
FAKE_API_KEY = "sk-proj-" + "Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1"


def seed_state() -> dict[str, Any]:
    """The example state of seed 000, key for key."""
    state: dict[str, Any] = json.loads((GOLDEN / "mdan-save-seed-example.json").read_bytes())
    return state


def save_context(state: dict[str, Any], saved_at: int) -> None:
    """MDAN-AUTO's ``save_context``, with the clock given (``saved_at``) and the directory
    the golden workspace's instead of /tmp."""
    filename = TARGET / f"mdan-save-{saved_at}.json"
    with open(filename, "w") as f:
        json.dump(state, f, indent=2)


def at(state: dict[str, Any], timestamp: str) -> dict[str, Any]:
    state = copy.deepcopy(state)
    state["timestamp"] = timestamp
    state["metadata"]["updated_at"] = timestamp
    return state


def main() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    seed = seed_state()
    # The seed's own example, under the seed's own name.
    save_context(seed, 1705310400)

    # A 20-digit integer: Python's int has no size limit, and json writes it as it is.
    big = at(seed, "2024-01-15T10:25:00Z")
    big["context"]["token_usage"]["total"] = 12345678901234567890
    big["metadata"]["save_count"] = 2**64 + 1
    big["cost_micros"] = -(10**30)
    save_context(big, 1705314300)

    # NaN and the infinities: what float arithmetic gives, json writes as NaN / Infinity.
    odd = at(seed, "2024-01-15T10:26:40Z")
    odd["context"]["token_usage"]["percentage"] = float("nan")
    odd["context"]["token_usage"]["limit"] = float("inf")
    odd["configuration"]["save_threshold"] = float("-inf")
    odd["quality_scores"] = [0.5, float("nan"), float("inf"), -0.0, 1e-7, 1.5e300]
    save_context(odd, 1705314400)

    # A secret in the conversation: the service redacts it (the one documented difference).
    secret = at(seed, "2024-01-15T10:28:20Z")
    secret["context"]["conversation_history"].append(
        {
            "role": "user",
            "content": f"Use the key {FAKE_API_KEY} for the staging deploy.",
            "timestamp": "2024-01-15T10:28:00Z",
        }
    )
    save_context(secret, 1705314500)

    # Text beyond ASCII: accents, CJK, an emoji (a surrogate pair in the escapes), RTL.
    text = at(seed, "2024-01-15T10:30:00Z")
    text["project"]["name"] = "Café Łódź 東京 🚀"
    text["project"]["description"] = "Überprüfung — «données» مرحبا\u2028fin"
    text["context"]["decisions"][0]["rationale"] = "データベースは SQL Server 😀"
    save_context(text, 1705314600)


if __name__ == "__main__":
    main()
