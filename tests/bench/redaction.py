"""Redaction's cost on a generated save of 1 and 10 MB: the service's whole-document walk, and,
where the running interpreter has it, detect-secrets' default plugins over the same file.

    .venv/bin/python -m tests.bench.redaction
    PYTHONPATH=. <a venv with detect-secrets>/bin/python -m tests.bench.redaction

Not run by ``make test``; the figures are in the README's Redaction section.
"""

import json
import time
from collections.abc import Callable
from typing import Any

from app.redaction import Redactions, redact_document
from tests.bench.documents import mdan_save

SIZES = (1_000_000, 10_000_000)
ROUNDS = 3


def _best_ms(run: Callable[[], Any]) -> float:
    best = float("inf")
    for _round in range(ROUNDS):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _detect_secrets(raw: bytes) -> Callable[[], int] | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    lines = raw.decode().splitlines()

    def scan() -> int:
        with default_settings():
            return sum(1 for line in lines for _secret in scan_line(line))

    return scan


def main() -> None:
    for size in SIZES:
        raw = mdan_save(size)
        walk_ms = _best_ms(lambda raw=raw: redact_document(json.loads(raw), Redactions()))
        print(f"{size // 1_000_000} MB redact_document: {walk_ms:.0f} ms (parse included)")
        scan = _detect_secrets(raw)
        if scan is not None and size == SIZES[0]:  # 10 MB takes minutes
            started = time.perf_counter()
            found = scan()
            took = (time.perf_counter() - started) * 1000
            print(f"{size // 1_000_000} MB detect-secrets: {took:.0f} ms, {found} findings")


if __name__ == "__main__":
    main()
