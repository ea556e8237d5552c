"""The results as markdown tables (printed, and pasted into the README)."""

from typing import Any


def _mark(met: bool) -> str:
    return "yes" if met else "**no**"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"Measured {machine['date']} on {machine['cpus']} cores ({machine['pinning']}"
        + (f"; {machine['postgresql']}" if "postgresql" in machine else "")
        + "), "
        f"load average {machine['load_before']} before and {machine['load_after']} after; "
        f"{machine['note']}",
        "",
    ]
    if results.get("appends"):
        lines += [
            "Small appends (ratio = req/s over the bare FastAPI ceiling; target ≥ 0.6; CPU ratio = "
            "the ceiling's CPU time per request over the append's; sent late = the most the "
            "load generator sent a request after it was due, over both open-loop passes):",
            "",
        ]
        lines += _table(
            [
                "backend",
                "append",
                "req/s",
                "ceiling req/s",
                "ratio",
                "met",
                "CPU ms/req",
                "ceiling's",
                "CPU ratio",
                "rate/s",
                "p50 ms",
                "p99 ms",
                "ceiling p50/p99 ms",
                "sent late ms",
                "errors",
            ],
            [
                [
                    r["backend"],
                    r["endpoint"],
                    r["rps"],
                    r["ceiling_rps"],
                    r["ratio"],
                    _mark(r["met"]),
                    r["cpu_ms"],
                    r["ceiling_cpu_ms"],
                    r["cpu_ratio"],
                    r["rate"],
                    r["p50_ms"],
                    r["p99_ms"],
                    f"{r['ceiling_p50_ms']} / {r['ceiling_p99_ms']}",
                    r["sent_late_max_ms"],
                    r["errors"],
                ]
                for r in results["appends"]
            ],
        )
    if results.get("saves"):
        lines += [
            "Large saves (ratio = latency over parse + render + one write or read "
            "in-process; target ≤ 3; memory = server's peak RSS growth over the body size):",
            "",
        ]
        lines += _table(
            [
                "backend",
                "save",
                "import ms",
                "ceiling ms",
                "ratio",
                "export ms (gzip)",
                "ceiling ms",
                "ratio",
                "met",
                "peak RSS / body",
                "ceiling's",
            ],
            [
                [
                    r["backend"],
                    r["size"],
                    r["import_ms"],
                    r["ceiling_import_ms"],
                    r["import_ratio"],
                    f"{r['export_ms']} ({r['export_gzip_ms']})",
                    r["ceiling_export_ms"],
                    r["export_ratio"],
                    _mark(r["met"]),
                    r["peak_rss_per_body"],
                    r["ceiling_peak_rss_per_body"],
                ]
                for r in results["saves"]
            ],
        )
    if results.get("floor"):
        lines += _floor(results)
    if results.get("peers"):
        lines += _peers(results)
    if results.get("scaling"):
        lines += [
            "Context pack and restore-by-rebuild as stored items grow (ratio to the smallest; "
            "flat means ≤ 2):",
            "",
        ]
        lines += _table(
            [
                "backend",
                "items",
                "seed s",
                "pack ms",
                "ratio",
                "pack CPU ms",
                "CPU ratio",
                "restore ms",
                "ratio",
                "restore CPU ms",
                "CPU ratio",
                "flat",
                "full scans in plans (largest size)",
                "sorts in plans (largest size)",
            ],
            [
                [
                    r["backend"],
                    f"{r['items']:,}",
                    r["seed_s"],
                    r["pack_ms"],
                    r["pack_ratio"],
                    r["pack_cpu_ms"],
                    r["pack_cpu_ratio"],
                    r["restore_ms"],
                    r["restore_ratio"],
                    r["restore_cpu_ms"],
                    r["restore_cpu_ratio"],
                    _mark(r["met"]),
                    "" if r["full_scans"] is None else r["full_scans"],
                    "" if r["sorts"] is None else r["sorts"],
                ]
                for r in results["scaling"]
            ],
        )
    if results.get("growth"):
        lines += [
            "Growth series (server CPU per append over each block of appends, the server "
            "pinned, the blocks sent in five parts with the sizes in turn; ratio to the first "
            "block; seed s = seconds to seed the size; flat means the last ≤ 1.2):",
            "",
        ]
        lines += _table(
            ["backend", "series", "held before the block", "block", "CPU ms/append", "ratio"]
            + ["p50 ms", "seed s", "flat"],
            [
                [
                    r["backend"],
                    r["series"],
                    f"{r['held']:,}",
                    r["block"],
                    r["cpu_ms"],
                    r["ratio"],
                    r["p50_ms"],
                    r["seconds"],
                    _mark(r["met"]) if "met" in r else "",
                ]
                for r in results["growth"]
            ],
        )
    if results.get("stalls"):
        lines += [
            "Other requests during one large call (another client asking /healthz every 10 ms; "
            "the longest it waited, median of three calls; ratio = over the REST route's with "
            "the same save):",
            "",
        ]
        lines += _table(
            [
                "backend",
                "save MB",
                "call",
                "call ms",
                "longest wait ms",
                "its p50 ms",
                "ratio",
            ],
            [
                [
                    r["backend"],
                    r["save_mb"],
                    r["door"],
                    r["call_ms"],
                    r["longest_wait_ms"],
                    r["probe_p50_ms"],
                    r["ratio"],
                ]
                for r in results["stalls"]
            ],
        )
    if results.get("concurrency"):
        lines += ["Run state under concurrent iteration starts:", ""]
        lines += _table(
            ["backend", "starts", "in flight", "starts/s", "failed", "lost updates", "consistent"],
            [
                [
                    r["backend"],
                    r["starts"],
                    r["concurrency"],
                    r["starts_per_s"],
                    sum(r["failed"].values()),
                    r["lost_updates"],
                    _mark(r["met"]),
                ]
                for r in results["concurrency"]
            ],
        )
    if results.get("failures"):
        lines += ["Parts that failed: " + "; ".join(results["failures"]), ""]
    return "\n".join(lines)


SAVER_TARGET = 3.0


def _floor(results: dict[str, Any]) -> list[str]:
    """A decision POST's CPU, in process, beside what lies beneath it."""
    rows = [
        [
            r["backend"],
            r["append_us"],
            r["not_found_us"],
            r["write_us"],
            r["statements"],
            r["driver_us"],
            round(r["driver_us"] / r["append_us"], 2),
            "-" if r.get("instructions") is None else f"{r['instructions']:,}",
        ]
        for r in results["floor"]
    ]
    return [
        "Where a decision POST's CPU goes, in process (the ASGI app called directly, in a "
        "process of its own on the server's core; µs of CPU per request): the whole POST; a "
        "request that only 404s (middleware, routing, the problem answer); the write alone "
        "(`Writes.run` in its worker thread: session, statements, service, commit); the same "
        "statements, captured from the driver, replayed on the raw driver with a commit each; "
        "and the POST's instructions, counted by callgrind (repeatable where CPU time is not; "
        "- without valgrind):",
        "",
        *_table(
            [
                "backend",
                "decision POST µs",
                "404 µs",
                "write µs",
                "statements",
                "raw driver µs",
                "raw driver / POST",
                "POST instructions",
            ],
            rows,
        ),
    ]


def _peers(results: dict[str, Any]) -> list[str]:
    """LangGraph's saver and store beside the saves and appends of the same backend."""
    saves = {r["backend"]: r for r in results.get("saves", []) if r["size"] == "1 MB"}
    # The growth series' first block: decisions sent one at a time into an empty project, as
    # the store's puts are (the appends part's p50 is under load, at half the closed-loop rate).
    decisions: dict[str, Any] = {}
    for r in results.get("growth", []):
        if r["series"] == "decision POST without id":
            decisions.setdefault(r["backend"], r)
    rows = []
    for peer in results["peers"]:
        ours = saves.get(peer["backend"])
        theirs = peer["saver_put_ms"] + peer["saver_get_ms"]
        ratio = None if ours is None else (ours["import_ms"] + ours["export_ms"]) / theirs
        decision = decisions.get(peer["backend"])
        rows.append(
            [
                peer["backend"],
                peer["saver_put_ms"],
                peer["saver_get_ms"],
                "" if ours is None else f"{ours['import_ms']} + {ours['export_ms']}",
                "" if ratio is None else round(ratio, 2),
                "" if ratio is None else _mark(ratio <= SAVER_TARGET),
                peer["store_put_ms"],
                "" if decision is None else decision["p50_ms"],
            ]
        )
    return [
        "Peers in-process, in a process of their own on the server's core: LangGraph's "
        "checkpointer (SqliteSaver / PostgresSaver) putting and getting the 1 MB save as a "
        "checkpoint, beside this service's import and export of it over HTTP (ratio: ours over "
        "theirs, target ≤ 3); its store (SqliteStore / PostgresStore) putting a small item, "
        "beside a decision POST's p50 over HTTP, one at a time (the growth series' first "
        "block):",
        "",
        *_table(
            [
                "backend",
                "saver put ms",
                "saver get ms",
                "our import + export ms",
                "ratio",
                "met",
                "store put ms",
                "our decision POST p50 ms",
            ],
            rows,
        ),
    ]


def plans_text(results: dict[str, Any]) -> str:
    lines = []
    for backend, plans in results.get("plans", {}).items():
        lines.append(f"Query plans of the pack and the restore ({backend}):")
        for plan in plans:
            flag = ("  FULL SCAN" if plan["full_scan"] else "") + ("  SORT" if plan["sort"] else "")
            lines.append(f"- {plan['statement'][:160]}{flag}")
            lines += [f"    {line}" for line in plan["plan"].splitlines()]
        lines.append("")
    return "\n".join(lines)
