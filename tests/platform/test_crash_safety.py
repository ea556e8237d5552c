"""A server under write load is killed with SIGKILL; after a restart every write it had
acknowledged (2xx) is there, intact: saves byte for byte, memory items as sent, iteration
starts all counted. Writes in flight at the kill were never acknowledged and may go either way.

The server is `context-store serve` in a process of its own, on a fresh database of the test's
backend, on a loopback port. The load runs a few seconds (``make soak``: longer).
"""

import threading
import time
from dataclasses import dataclass, field
from itertools import count

import httpx

from app.core.migrations import upgrade
from tests.helpers import SOAK, python_indent2, seed_save
from tests.platform.servers import Server, create_key_in

WRITERS = 4
LOAD_SECONDS = 2.0 * SOAK
PROJECT = "crash"


@dataclass
class Acknowledged:
    """What the server said 2xx to, with what was sent."""

    saves: dict[int, bytes] = field(default_factory=dict)
    decisions: dict[str, dict] = field(default_factory=dict)
    starts: dict[str, list[str]] = field(default_factory=dict)  # run -> beads, in order
    server_errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def total(self) -> int:
        return len(self.saves) + len(self.decisions) + sum(map(len, self.starts.values()))


def _save(marker: str) -> bytes:
    document = seed_save()
    document["context"]["conversation_history"][0]["content"] = marker
    return python_indent2(document)


def _writer(url: str, key: str, writer: int, done: Acknowledged, stop: threading.Event) -> None:
    run = f"run-{writer}"
    base = f"/v1/projects/{PROJECT}"
    with httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10
    ) as client:
        for step in count():
            if stop.is_set():
                return
            name = f"w{writer}-{step}"
            try:
                if step % 3 == 0:
                    content = _save(name)
                    response = client.post(
                        base + "/saves",
                        content=content,
                        headers={"Content-Type": "application/json"},
                    )
                    if response.status_code == 201:
                        with done.lock:
                            done.saves[response.json()["id"]] = content
                elif step % 3 == 1:
                    item = {"id": name, "decision": f"decided {name}", "timestamp": 1734604500000}
                    response = client.post(base + "/memory/decisions", json=item)
                    if response.status_code == 201:
                        with done.lock:
                            done.decisions[name] = item
                else:
                    response = client.post(f"{base}/runs/{run}/iterations", json={"bead_id": name})
                    if response.status_code == 200:
                        with done.lock:
                            done.starts.setdefault(run, []).append(name)
                if response.status_code >= 500:
                    with done.lock:
                        done.server_errors.append(response.text)
            except httpx.TransportError:
                # A slow answer or the server gone: this write was never acknowledged. Go on
                # until the kill sets ``stop`` (a timeout on a loaded machine is not the end).
                continue


def _missing(client: httpx.Client, done: Acknowledged) -> list[str]:
    missing: list[str] = []
    base = f"/v1/projects/{PROJECT}"
    for save_id, content in done.saves.items():
        if client.get(f"{base}/saves/{save_id}").content != content:
            missing.append(f"save {save_id}")
    for name, item in done.decisions.items():
        response = client.get(f"{base}/memory/decisions/{name}")
        if response.status_code != 200 or response.json()["item"] != item:
            missing.append(f"decision {name}")
    for run, beads in done.starts.items():
        state = client.get(f"{base}/runs/{run}/state").json()
        # A start in flight at the kill may have committed without its answer arriving.
        if not len(beads) <= state["iteration"] <= len(beads) + 1:
            missing.append(f"{run}: iteration {state['iteration']} for {len(beads)} starts")
        missing += [f"{run} bead {bead}" for bead in beads if bead not in state["history"]]
    return missing


def test_acknowledged_writes_survive_sigkill(backend, tmp_path, record_property):
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "crash")
    server = Server(database_url, tmp_path / "server.log")
    done = Acknowledged()
    stop = threading.Event()
    try:
        server.start()
        writers = [
            threading.Thread(target=_writer, args=(server.url, key, n, done, stop))
            for n in range(WRITERS)
        ]
        for writer in writers:
            writer.start()
        # The load phase counts from the first acknowledged write: on a busy machine the first
        # answers can take longer than the whole phase.
        deadline = time.monotonic() + 120
        while done.total() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(LOAD_SECONDS)
        server.kill()  # mid-load: every writer has a request in flight
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
        assert done.total() > 0, "no write was acknowledged before the kill"

        server.start()
        with httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        ) as client:
            missing = _missing(client, done)
    finally:
        stop.set()
        server.stop()
    record_property("crash_writes_acknowledged", done.total())
    record_property("crash_writes_found_after_kill", done.total() - len(missing))
    assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:10]}"
    assert not done.server_errors, done.server_errors[:3]
