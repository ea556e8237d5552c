"""The storage ceiling of a save, in a process of its own on the server's core: parse the
JSON, render it as the tool's writer does (``json.dumps(doc, indent=2)``), and one database
write (import); one database read, parse and render (export). Nothing else: no HTTP, no
validation, no redaction, no compression.

    python -m tests.bench.storage_ceiling BODY_FILE DATABASE_URL REPEATS

prints one JSON line: median seconds of each, and the peak resident growth of the import.
"""

import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from tests.bench.servers import peak_rss_reset, rss_bytes


def _sqlite(url: str) -> tuple[Any, str]:
    connection = sqlite3.connect(make_url(url).database or "", isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE IF NOT EXISTS ceiling (id INTEGER PRIMARY KEY, content BLOB)")
    return connection, "?"


def _postgres(url: str) -> tuple[Any, str]:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    connection = psycopg.connect(dsn, autocommit=True)
    connection.execute("CREATE TEMP TABLE ceiling (id BIGSERIAL PRIMARY KEY, content BYTEA)")
    return connection, "%s"


def _timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main(body_file: str, url: str, repeats: int) -> None:
    connection, mark = _sqlite(url) if url.startswith("sqlite") else _postgres(url)

    def import_once() -> None:
        # Read here, not before: the server too holds the body only once it has arrived.
        raw = Path(body_file).read_bytes()
        content = json.dumps(json.loads(raw), indent=2).encode()
        connection.execute("BEGIN")
        connection.execute(f"INSERT INTO ceiling (id, content) VALUES (1, {mark})", (content,))
        connection.execute("COMMIT")

    def export_once() -> None:
        row = connection.execute("SELECT content FROM ceiling WHERE id = 1").fetchone()
        json.dumps(json.loads(bytes(row[0])), indent=2).encode()

    pid = os.getpid()
    imports, exports, growth = [], [], []
    for _ in range(repeats):
        connection.execute("DELETE FROM ceiling")
        peak_rss_reset(pid)
        before, _ = rss_bytes(pid)
        imports.append(_timed(import_once))
        growth.append(rss_bytes(pid)[1] - before)
        exports.append(_timed(export_once))
    print(
        json.dumps(
            {
                "import_s": statistics.median(imports),
                "export_s": statistics.median(exports),
                "peak_growth_bytes": max(growth),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
