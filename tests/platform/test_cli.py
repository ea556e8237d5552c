"""The ``context-store`` command, run as a user runs it."""

import asyncio
import gc
import importlib.metadata
import itertools
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import typer
import uvicorn
from typer.core import TyperGroup
from typer.testing import CliRunner

from app import cli as cli_module
from app.cli import WARM_UP_REQUESTS, WarmingServer, cli
from app.core.migrations import head_revision
from tests.conftest import client_for
from tests.helpers import assert_problem, python_indent2, seed_save

CLI = [sys.executable, "-m", "app"]


def _run(args: list[str], database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = os.environ | {"CONTEXT_STORE_DATABASE_URL": database_url} | env
    return subprocess.run(
        CLI + args, env=environment, capture_output=True, text=True, timeout=60, check=False
    )


def test_keys_create_prints_the_key_alone_on_the_last_line(app, database_url, tenant):
    result = _run(["keys", "create", "--tenant", tenant, "--scopes", "read,write"], database_url)
    assert result.returncode == 0, result.stderr
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("cs_") and " " not in key
    client = client_for(app, key)
    assert client.get("/v1/projects").status_code == 200
    assert client.post("/v1/admin/keys", json={"scopes": ["read"]}).status_code == 403


def test_keys_list_and_revoke(app, database_url, tenant):
    created = _run(["keys", "create", "--tenant", tenant, "--scopes", "read"], database_url)
    key = created.stdout.strip().splitlines()[-1]
    key_id = created.stdout.split("id=", 1)[1].split()[0]
    listed = _run(["keys", "list", "--tenant", tenant], database_url)
    assert key_id in listed.stdout and key not in listed.stdout
    assert _run(["keys", "revoke", key_id], database_url).returncode == 0
    assert client_for(app, key).get("/v1/projects").status_code == 401
    assert "revoked" in _run(["keys", "list", "--tenant", tenant], database_url).stdout


@pytest.mark.parametrize(
    "args", [["--scopes", "read,root"], ["--scopes", ""], ["--tenant", "../x"]]
)
def test_keys_create_refuses_bad_input(database_url, args):
    base = {"--tenant": "valid", "--scopes": "read"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    result = _run(
        ["keys", "create", *[part for pair in base.items() for part in pair]], database_url
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


def test_serve_refuses_auth_off_on_a_public_address(tmp_path):
    result = _run(
        ["serve"],
        f"sqlite:///{tmp_path / 'x.db'}",
        CONTEXT_STORE_AUTH="off",
        CONTEXT_STORE_HOST="0.0.0.0",
    )
    assert result.returncode != 0
    assert "loopback" in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(url: str, port: int, log: Path, **env: str) -> subprocess.Popen[bytes]:
    """`context-store serve` on a migrated database, auth off, once it answers."""
    environment = (
        os.environ
        | {
            "CONTEXT_STORE_DATABASE_URL": url,
            "CONTEXT_STORE_AUTH": "off",
            "CONTEXT_STORE_PORT": str(port),
        }
        | env
    )
    server = subprocess.Popen(CLI + ["serve"], env=environment, stderr=log.open("wb"))
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return server
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.2)


def _migrated_sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'data' / 'context-store.db'}"
    assert _run(["migrate"], url).returncode == 0
    return url


def test_migrate_then_serve_like_make_run(tmp_path):
    """What `make run` does, on a fresh SQLite file: migrate, serve, probe."""
    port = _free_port()
    server = _serve(_migrated_sqlite(tmp_path), port, tmp_path / "server.log")
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/readyz").json()["database"] == "sqlite"
        assert httpx.get(f"{base}/docs").status_code == 200
        assert "context_store_http_requests_total" in httpx.get(f"{base}/metrics").text
        assert httpx.get(f"{base}/v1/projects").status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.05)


def _posts_in_flight(base: str) -> bool:
    metrics = httpx.get(f"{base}/metrics").text
    return 'context_store_http_requests_in_progress{method="POST"} 1.0' in metrics


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


class StalledImport:
    """A save import whose body stops after its first bytes until ``finish`` is called."""

    def __init__(self, base: str) -> None:
        self.body = python_indent2(seed_save())
        self.rest_may_go = threading.Event()
        self.responses: list[httpx.Response] = []
        self.errors: list[httpx.HTTPError] = []
        self.thread = threading.Thread(target=self._send, args=(base,))
        self.thread.start()
        _wait_for(lambda: _posts_in_flight(base), "the import to reach the app")

    def _chunks(self) -> Iterator[bytes]:
        yield self.body[:100]
        self.rest_may_go.wait(timeout=60)
        yield self.body[100:]

    def _send(self, base: str) -> None:
        try:
            self.responses.append(
                httpx.post(
                    f"{base}/v1/projects/p/saves",
                    content=self._chunks(),
                    headers={"Content-Type": "application/json", "X-Request-ID": "in-flight"},
                    timeout=60,
                )
            )
        except httpx.HTTPError as exc:
            self.errors.append(exc)

    def finish(self) -> None:
        self.rest_may_go.set()
        self.thread.join(timeout=60)


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.kill()
        server.wait()


def _log_lines(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_sigterm_finishes_the_request_in_flight_then_exits_0(tmp_path):
    """A save import whose body is still arriving when SIGTERM comes is completed and answered;
    the server stops taking connections meanwhile, and exits 0 once it is done."""
    port, log = _free_port(), tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}"
    server = _serve(
        _migrated_sqlite(tmp_path), port, log, CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS="60"
    )
    upload: StalledImport | None = None
    try:
        upload = StalledImport(base)
        server.send_signal(signal.SIGTERM)
        _wait_for(lambda: _refuses_connections(port), "the server to stop accepting")
        assert server.poll() is None, "the server exited with a request in flight"
        upload.finish()
        assert server.wait(timeout=30) == 0
    finally:
        if upload is not None:
            upload.finish()
        _stop(server)
    [response] = upload.responses
    assert response.status_code == 201, response.text
    assert response.json()["filename"] == "mdan-save-1705314225.json"
    lines = _log_lines(log)
    [logged] = [line for line in lines if line.get("request_id") == "in-flight"]
    assert logged["status"] == 201 and logged["route"] == "/v1/projects/{project}/saves"
    assert "Shutting down" in [line["message"] for line in lines]


def test_sigterm_cancels_what_outlasts_the_grace_period_answers_503_and_exits_0(
    tmp_path, database_url
):
    port, log = _free_port(), tmp_path / "server.log"
    server = _serve(database_url, port, log, CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS="0.5")
    upload: StalledImport | None = None
    try:
        upload = StalledImport(f"http://127.0.0.1:{port}")
        server.send_signal(signal.SIGTERM)
        # The body never completes before the server is done with it.
        assert server.wait(timeout=30) == 0
    finally:
        if upload is not None:
            upload.finish()
        _stop(server)
    # Told to come back (503), where uvicorn would answer 500; or, while the client was still
    # sending its body, the connection closed under it.
    assert upload.responses or upload.errors
    for response in upload.responses:
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.headers["retry-after"] == "1"
        # Nothing pipelined behind it may start on a server that has shut down.
        assert response.headers["connection"] == "close"
        assert response.json()["type"] == "urn:context-store:problem:unavailable"
    lines = _log_lines(log)
    messages = [str(line["message"]) for line in lines]
    assert any("timeout graceful shutdown exceeded" in message for message in messages)
    [logged] = [line for line in lines if line.get("request_id") == "in-flight"]
    assert logged["status"] == 503
    # The cancellation is what the server meant: no traceback, as for a failure.
    assert not any(message.startswith("Exception in ASGI application") for message in messages)


# The first ten minutes: what a newcomer meets, run as they run it.

ROOT = Path(__file__).resolve().parents[2]
MAKE_ENVIRONMENT = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")


class Console:
    """A process whose standard output and error are read as one console, line by line."""

    def __init__(self, command: list[str], **env: str) -> None:
        environment = {k: v for k, v in os.environ.items() if k not in MAKE_ENVIRONMENT} | env
        self.process = subprocess.Popen(
            command,
            env=environment,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: make and the server it starts
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_until_healthy(self, port: int) -> None:
        def healthy() -> bool:
            assert self.process.poll() is None, "\n".join(self.lines)
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            except httpx.TransportError:
                return False

        _wait_for(healthy, "the server to answer")

    def stop(self, signal_number: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal_number)
        status = self.process.wait(timeout=30)
        self.reader.join(timeout=30)
        return status


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _first_curl_example() -> str:
    """The README's first shell block that calls the API, as a newcomer would paste it."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.DOTALL)
    return next(block for block in blocks if "curl " in block)


def test_make_run_says_where_it_serves_and_the_readme_example_works_as_is(tmp_path):
    """`make run` (its install step taken as done), then the README's first curl example."""
    port = _free_port()
    database = tmp_path / "data" / "context-store.db"
    prefix = Path(sys.prefix)
    console = Console(
        ["make", "-s", f"VENV={prefix}", "-o", str(prefix / ".installed-service"), "run"],
        CONTEXT_STORE_DATABASE_URL=f"sqlite:///{database}",
        CONTEXT_STORE_PORT=str(port),
    )
    try:
        console.wait_until_healthy(port)
        example = _first_curl_example()
        assert "Authorization" not in example and "KEY" not in example
        example = example.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        ran = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", example],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        assert console.stop() in (0, -signal.SIGTERM, 2)
    assert ran.returncode == 0, ran.stderr
    assert '"filename":"mdan-save-1705314225.json"' in ran.stdout, ran.stdout
    downloaded = json.loads((tmp_path / "mdan-save-1705314225.json").read_bytes())
    assert downloaded["version"] == "1.0"

    first_json = next(i for i, line in enumerate(console.lines) if _is_json(line))
    banner = "\n".join(console.lines[:first_json])
    assert f"http://127.0.0.1:{port}" in banner, console.lines
    assert f"http://127.0.0.1:{port}/docs" in banner
    assert str(database) in banner and f"(migrated to {head_revision()})" in banner
    assert re.search(r"auth\s+off", banner), banner


def test_make_run_installs_the_service_without_the_test_tools():
    def commands(target: str) -> str:
        environment = {k: v for k, v in os.environ.items() if k not in MAKE_ENVIRONMENT}
        listed = subprocess.run(
            ["make", "-n", "-B", target],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            check=True,
        )
        return listed.stdout

    run = commands("run")
    assert re.search(r"pip install .*-e \.(\s|$)", run, flags=re.MULTILINE), run
    assert "[dev]" not in run and "pytest" not in run
    assert "-e '.[dev]'" in commands("test")


def test_serve_on_a_busy_port_names_the_setting_to_change(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args, env in (
            (["serve"], {"CONTEXT_STORE_PORT": str(port)}),
            (["serve", "--port", str(port)], {}),
        ):
            result = _run(args, _migrated_sqlite(tmp_path), CONTEXT_STORE_AUTH="off", **env)
            assert result.returncode == 1, result
            assert f"127.0.0.1:{port}" in result.stderr and "in use" in result.stderr
            assert "--port" in result.stderr and "CONTEXT_STORE_PORT" in result.stderr
            assert "Traceback" not in result.stderr and not _is_json(result.stderr)


def test_serve_takes_host_and_port_options_over_the_environment(tmp_path):
    port = _free_port()
    console = Console(
        [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port)],
        CONTEXT_STORE_DATABASE_URL=_migrated_sqlite(tmp_path),
        CONTEXT_STORE_AUTH="off",
        CONTEXT_STORE_HOST="localhost",
        CONTEXT_STORE_PORT="1",  # not where it listens: the option wins
    )
    try:
        console.wait_until_healthy(port)
    finally:
        # Ctrl-C, as in a terminal: a graceful stop, status 0, no traceback.
        assert console.stop(signal.SIGINT) == 0, console.lines
    assert "Shutting down" in "\n".join(console.lines)
    assert not any("Traceback" in line or "Aborted" in line for line in console.lines)
    refused = _run(
        ["serve", "--host", "0.0.0.0"], f"sqlite:///{tmp_path / 'x.db'}", CONTEXT_STORE_AUTH="off"
    )
    assert refused.returncode != 0 and "loopback" in refused.stderr


_LOGGING_SWITCHES = (
    "_srcfile",
    "logThreads",
    "logProcesses",
    "logMultiprocessing",
    "logAsyncioTasks",
)


def _serve_until_it_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, when_running: Callable[[object], None]
) -> None:
    """``serve`` in process, up to where uvicorn would start serving: there
    ``when_running(app)`` is called instead, and serve returns. The process-wide state serve
    sets is put back after: SIGTERM's handler, the frozen heap, the logging switches."""
    for switch in _LOGGING_SWITCHES:
        if hasattr(logging, switch):
            monkeypatch.setattr(logging, switch, getattr(logging, switch))

    class Recorder:
        started = True

        def __init__(self, app: object) -> None:
            self.app = app

        def run(self, sockets: list[socket.socket]) -> None:
            when_running(self.app)
            for listening in sockets:
                listening.close()

    monkeypatch.setattr(uvicorn, "Config", lambda app, **_options: app)
    monkeypatch.setattr(cli_module, "WarmingServer", Recorder)
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        result = CliRunner().invoke(
            cli,
            ["serve", "--port", str(_free_port())],
            env={"CONTEXT_STORE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"},
        )
    finally:
        gc.unfreeze()
        signal.signal(signal.SIGTERM, sigterm)
    assert result.exit_code == 0, result.output


def test_serve_runs_with_the_built_app_out_of_garbage_collection(monkeypatch, tmp_path):
    """A full collection walks every object it tracks; the app's own, built once and alive as
    long as the process, are frozen before the server runs (README, "The open-loop p99")."""
    seen: list[bool] = []
    assert gc.get_freeze_count() == 0
    _serve_until_it_runs(
        monkeypatch,
        tmp_path,
        lambda app: seen.append(all(tracked is not app for tracked in gc.get_objects())),
    )
    assert seen == [True]


async def _unserved_app(scope: object, receive: object, send: object) -> None:
    """An app for a server that is never started."""


def test_the_server_freezes_once_what_its_first_requests_built():
    """A server's first requests build what its routes build on first use (FastAPI's route
    contexts, SQLAlchemy's mapped attributes): once it has served ``WARM_UP_REQUESTS``, what
    is alive is frozen too, once, so that no full collection walks it again."""
    server = WarmingServer(uvicorn.Config(app=_unserved_app))
    assert gc.get_freeze_count() == 0
    built_by_requests = {"routes": []}
    try:
        server.server_state.total_requests = WARM_UP_REQUESTS - 1
        asyncio.run(server.on_tick(1))
        assert gc.get_freeze_count() == 0
        server.server_state.total_requests = WARM_UP_REQUESTS
        asyncio.run(server.on_tick(2))
        assert gc.get_freeze_count() > 0
        assert all(tracked is not built_by_requests for tracked in gc.get_objects())
        built_later = {"routes": []}
        server.server_state.total_requests = 10 * WARM_UP_REQUESTS
        asyncio.run(server.on_tick(3))
        assert any(tracked is built_later for tracked in gc.get_objects())
    finally:
        gc.unfreeze()


def test_serve_logs_records_without_what_no_line_shows(monkeypatch, tmp_path):
    """The caller's frame and the thread's and process's names are gathered for no record the
    server logs (none of its lines shows them): uvicorn configures serve's logging, not
    ``configure_logging``, so serve turns them off itself (logging HOWTO, "Optimization")."""
    records: list[logging.LogRecord] = []

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("tests.serve")
    monkeypatch.setattr(logger, "handlers", [Kept()])
    monkeypatch.setattr(logger, "propagate", False)
    _serve_until_it_runs(monkeypatch, tmp_path, lambda _app: logger.warning("serving"))
    (record,) = records
    assert (record.pathname, record.lineno) == ("(unknown file)", 0)
    assert record.threadName is None and record.process is None and record.processName is None
    assert getattr(record, "taskName", None) is None  # Python 3.12's, the container's


def test_serve_on_an_unmigrated_database_says_so_and_answers_503_naming_migrate(backend):
    port = _free_port()
    console = Console(
        [*CLI, "serve", "--banner", "--port", str(port)],
        CONTEXT_STORE_DATABASE_URL=backend.new_database_url(),
        CONTEXT_STORE_AUTH="off",
    )
    try:
        console.wait_until_healthy(port)
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/projects/demo/saves",
            content=python_indent2(seed_save()),
            headers={"Content-Type": "application/json"},
        )
    finally:
        assert console.stop() == 0
    problem = assert_problem(response, 503)
    assert "context-store migrate" in problem["detail"]
    banner = "\n".join(console.lines)
    assert "not migrated" in banner and "context-store migrate" in banner


def test_a_key_sent_to_a_server_with_auth_off_is_flagged(tmp_path):
    port, log = _free_port(), tmp_path / "server.log"
    server = _serve(_migrated_sqlite(tmp_path), port, log)
    base = f"http://127.0.0.1:{port}"
    try:
        plain = httpx.get(f"{base}/v1/projects")
        keyed = [
            httpx.get(f"{base}/v1/projects", headers={"Authorization": "Bearer cs_mine"}),
            httpx.get(f"{base}/v1/projects", headers={"X-API-Key": "cs_mine"}),
        ]
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert plain.status_code == 200 and "warning" not in plain.headers
    for response in keyed:
        assert response.status_code == 200
        assert response.headers["warning"].startswith('299 - "')
        assert "auth" in response.headers["warning"].lower()
    warnings = [line for line in _log_lines(log) if line["level"] == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "CONTEXT_STORE_AUTH=off" in str(warnings[0]["message"])
    assert "cs_mine" not in log.read_text()


def _commands(group: TyperGroup, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def test_every_help_reads_cleanly():
    """No markup left over from docstrings, and no line broken early where its source line
    ended: at 80 columns each line of a paragraph is filled before the next begins."""
    group = typer.main.get_command(cli)
    assert isinstance(group, TyperGroup)
    paths = list(_commands(group))
    assert ("keys", "list") in paths and ("serve",) in paths
    for path in paths:
        shown = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "80"})
        assert shown.exit_code == 0, shown.output
        assert "``" not in shown.output, shown.output
        for paragraph in re.split(r"\n\s*\n", shown.output):
            lines = [line.rstrip() for line in paragraph.strip("\n").splitlines()]
            if not lines or lines[0].endswith(":") or lines[0].lstrip().startswith("╭"):
                continue  # a table of options, arguments or commands
            for line, following in itertools.pairwise(lines):
                next_word = following.split()[0] if following.split() else ""
                # Every formatter wraps at 76 columns or more here: a line that had room for
                # the next word with columns to spare was broken by its source.
                assert len(line) + 1 + len(next_word) > 70, f"{' '.join(path)} --help:\n{paragraph}"


def test_version():
    shown = _run(["--version"], "sqlite://")
    assert shown.returncode == 0
    assert shown.stdout.strip() == f"context-store {importlib.metadata.version('context-store')}"


def test_keys_list_starts_with_a_header_row(app, database_url, tenant):
    _run(["keys", "create", "--tenant", tenant, "--scopes", "read", "--name", "ci"], database_url)
    listed = _run(["keys", "list", "--tenant", tenant], database_url).stdout.splitlines()
    assert listed[0].split() == ["ID", "TENANT", "SCOPES", "PREFIX", "STATE", "NAME"]
    assert listed[1].split("\t")[1:3] == [tenant, "read"] and listed[1].endswith("ci")
