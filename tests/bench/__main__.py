"""``python -m tests.bench``: the benchmark suite (``make bench``), never part of ``make test``.

Every figure is a ratio to a ceiling measured in the same run, so that a busy machine moves
both sides of it: small appends against a bare FastAPI endpoint, large saves against parsing,
rendering and one database write in-process, the pack and restore against themselves with
fewer items. Servers run on one core, the load generator on the other. Writes the results as
JSON and markdown and prints the tables.
"""

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import appends, concurrency, saves, scaling
from tests.bench.report import markdown, plans_text
from tests.bench.servers import (
    ROOT,
    BenchDatabase,
    Cores,
    app_server,
    ceiling_server,
    postgres_reachable,
)

PARTS = ("appends", "saves", "scaling", "concurrency")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument(
        "--sizes",
        default="1000,100000,1000000",
        help="stored items for the pack and restore runs (the first is the baseline)",
    )
    parser.add_argument(
        "--postgresql-sizes",
        default="1000,100000",
        help="the same on PostgreSQL, whose bulk seeding is slower (budget: 10 minutes)",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="per load pass")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    parser.add_argument("--note", default="", help="what the machine was doing meanwhile")
    return parser.parse_args()


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _backend_parts(
    backend: str, args: argparse.Namespace, cores: Cores, workdir: Path, ceiling: Any
) -> dict[str, Any]:
    parts = set(args.parts.split(","))
    found: dict[str, Any] = {}
    database = BenchDatabase.create(backend, workdir)

    def part(name: str, measure: Any) -> None:
        """One part; a failure is recorded and the others still run."""
        if name not in parts:
            return
        print(f"[{backend}] {name}", flush=True)
        try:
            measure()
        except Exception as exc:  # the run goes on; the failure is in the results
            found.setdefault("failures", []).append(f"{backend} {name}: {exc!r}")
            print(f"[{backend}] {name} failed: {exc!r}", file=sys.stderr, flush=True)

    try:
        with app_server(database, cores, workdir / f"{backend}.log") as server:

            def run_appends() -> None:
                found["appends"] = appends.run(backend, server, ceiling, database.key, args.seconds)

            def run_concurrency() -> None:
                found["concurrency"] = [concurrency.run(backend, server, database.key)]

            def run_saves() -> None:
                found["saves"] = saves.run(backend, server, database, cores, workdir)

            def run_scaling() -> None:
                sizes = args.sizes if backend == "sqlite" else args.postgresql_sizes
                rows, plans = scaling.run(
                    backend, server, database, [int(n) for n in sizes.split(",")]
                )
                found["scaling"] = rows
                found["plans"] = {backend: plans}

            part("appends", run_appends)
            part("concurrency", run_concurrency)
            part("saves", run_saves)
            part("scaling", run_scaling)
    finally:
        database.drop()
    return found


def main() -> int:
    args = _arguments()
    cores = Cores.pick()
    cores.pin_this_process()
    backends = args.backends.split(",")
    if "postgresql" in backends and not postgres_reachable():
        print("PostgreSQL is not reachable: its half is left out.", file=sys.stderr)
        backends.remove("postgresql")
    started = time.monotonic()
    results: dict[str, Any] = {
        "machine": {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "cpus": os.cpu_count(),
            "pinning": f"servers on core {cores.server}, load on core {cores.client}"
            if cores.server is not None
            else "not pinned: fewer than 2 cores",
            "python": platform.python_version(),
            "load_before": _load(),
            "note": args.note or "nothing else known about the machine's state",
        }
    }
    workdir = Path(tempfile.mkdtemp(prefix="context-store-bench-"))
    try:
        with ceiling_server(cores, workdir / "ceiling.log") as ceiling:
            for backend in backends:
                for name, value in _backend_parts(backend, args, cores, workdir, ceiling).items():
                    if name == "plans":
                        results.setdefault("plans", {}).update(value)
                    else:
                        results.setdefault(name, []).extend(value)
    except BaseException:
        print(f"the logs are in {workdir}", file=sys.stderr)
        raise
    shutil.rmtree(workdir)
    results["machine"]["load_after"] = _load()
    results["machine"]["seconds"] = round(time.monotonic() - started)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    out.with_suffix(".md").write_text(table + "\n")
    print(plans_text(results))
    print(table)
    print(f"results: {out} ({results['machine']['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
