"""Peers, in-process, in a process of their own on the server's core (issue 20): what a Python
agent would otherwise use. LangGraph's checkpointer (``SqliteSaver`` / ``PostgresSaver``) puts
and gets the same 1 MB save as the saves part imports and exports, as one channel's value of a
checkpoint; its store (``SqliteStore`` / ``PostgresStore``) puts a small item, against which
the appends compare. Needs the ``bench`` extra.

    python -m tests.bench.peers BODY_FILE DATABASE_URL SQLITE_FILE REPEATS

prints one JSON line: the median milliseconds of each operation.
"""

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from tests.bench import saves
from tests.bench.servers import ROOT, BenchDatabase, Cores

# As many as the saves part's 1 MB imports (tests/bench/saves.py), for as steady a median.
REPEATS = 15

SMALL_ITEM = {
    "text": "Store document bytes, never JSONB: key order and duplicates must survive",
    "category": "architecture",
    "impact": ["saves", "exports"],
}


def _median_ms(action: Callable[[int], Any], repeats: int) -> float:
    action(-1)  # warm-up: statements prepared, pages cached
    samples = []
    for number in range(repeats):
        started = time.perf_counter()
        action(number)
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 2)


@contextmanager
def _saver_and_store(url: str, sqlite_file: str) -> Iterator[tuple[Any, Any]]:
    if url.startswith("sqlite"):
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        with (
            SqliteSaver.from_conn_string(sqlite_file) as saver,
            SqliteStore.from_conn_string(sqlite_file + "-store") as store,
        ):
            store.setup()
            yield saver, store
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with PostgresSaver.from_conn_string(dsn) as saver, PostgresStore.from_conn_string(dsn) as store:
        saver.setup()
        store.setup()
        yield saver, store


def main(body_file: str, url: str, sqlite_file: str, repeats: int) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    state = json.loads(Path(body_file).read_bytes())
    config = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    with _saver_and_store(url, sqlite_file) as (saver, store):

        def put(number: int) -> None:
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"save": state}
            checkpoint["channel_versions"] = {"save": number + 2}
            saver.put(config, checkpoint, {"step": number}, {"save": number + 2})

        def get(_number: int) -> Any:
            return saver.get_tuple(config)

        def store_put(number: int) -> None:
            store.put(("bench", "memory"), f"item-{number}", SMALL_ITEM)

        figures = {
            "saver_put_ms": _median_ms(put, repeats),
            "saver_get_ms": _median_ms(get, repeats),
            "store_put_ms": _median_ms(store_put, repeats * 10),
        }
        assert get(0).checkpoint["channel_values"]["save"] == state
        print(json.dumps(figures))


def run(backend: str, database: BenchDatabase, cores: Cores, workdir: Path) -> dict[str, Any]:
    """This module in a process of its own on the server's core, on the saves part's 1 MB
    body (PostgreSQL: in the run's own database; SQLite: in files of its own)."""
    body = saves.body_file(workdir, saves.MIB)
    command = [*cores.server_prefix(), sys.executable, "-m", "tests.bench.peers", str(body)]
    command += [database.url, str(workdir / f"langgraph-{backend}.db"), str(REPEATS)]
    output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    return {"backend": backend, **json.loads(output.stdout.strip().splitlines()[-1])}


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
