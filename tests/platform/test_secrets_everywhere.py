"""Hostile: secrets of every kind, in every position of every format, never reach the database
rows, the logs, an idempotent replay, a warning, a problem or an export.

Each case writes one document holding one secret, through the format's own route (saves) or
the archive import (every format: it hands each member to its format's own service), twice
with one Idempotency-Key, and then looks for the secret's sensitive part in the raw rows of
every table (read with the ``engine``), the records logged meanwhile, the receipt, the replay
and the export.
"""

import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import (
    SOAK,
    assert_problem,
    import_save,
    python_indent2,
    seed_save,
    tar_gz,
    untar,
)
from tests.helpers import workspace_files as golden_workspace
from tests.saves.test_redaction_properties import stored_strings

# kind -> (what is written, what must not survive)
SECRETS: dict[str, tuple[str, str]] = {
    "api_key": ("sk-ant-api03-Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5", "Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5"),
    "cloud_access_key": ("AKIAZ7Q4K2LM9XP4RT6Y", "AKIAZ7Q4K2LM9XP4RT6Y"),
    "bearer_token": ("Authorization: Bearer Zq7Wk2Lm9Xp4Rt6Yv8", "Zq7Wk2Lm9Xp4Rt6Yv8"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJxNzQifQ.Qz7Wk2Lm9Xp4Rt6Yv8", "Qz7Wk2Lm9Xp4Rt6Yv8"),
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIZq7Wk2Lm9Xp4Rt6Yv8\n-----END RSA PRIVATE KEY-----",
        "MIIZq7Wk2Lm9Xp4Rt6Yv8",
    ),
    "password_assignment": ("db password=Hunter2-Assign-77", "Hunter2-Assign-77"),
    "json_quoted_key": ('{"password": "Hunter2 Json 77"}', "Hunter2 Json 77"),
    "python_quoted_key": ("{'password': 'Hunter2-Py-77'}", "Hunter2-Py-77"),
    "client_secret": ('"client_secret": "Cs-Qz7Wk2Lm9"', "Cs-Qz7Wk2Lm9"),
    "token_colon": ("token: Tk-Qz7Wk2Lm9", "Tk-Qz7Wk2Lm9"),
    "url_credentials": ("postgres://admin:Pg-Qz7Wk2Lm9@db.internal:5432/app", "Pg-Qz7Wk2Lm9"),
    "basic_auth": ("Authorization: Basic YWRtaW46UXo3V2syTG05", "YWRtaW46UXo3V2syTG05"),
}
KINDS = sorted(SECRETS)


def _logs(caplog: pytest.LogCaptureFixture, first: int) -> list[str]:
    return [record.getMessage() for record in caplog.records[first:]]


def _assert_nowhere(sensitive: str, where: dict[str, list[str]]) -> None:
    for name, haystacks in where.items():
        found = [text for text in haystacks if sensitive in text]
        assert not found, f"the secret survives in the {name}: {found[0][:300]!r}"


def _twice(client: httpx.Client, send: Callable[[dict[str, str]], httpx.Response], key: str):
    """The first response and its replay under one Idempotency-Key."""
    first = send({"Idempotency-Key": key})
    replay = send({"Idempotency-Key": key})
    assert replay.headers.get("Idempotent-Replayed") == "true", replay.text
    return first, replay


# Positions in a save: where the secret goes, as a change to the seed's document.
def _message_metadata(document: dict[str, Any], secret: str) -> None:
    document["context"]["conversation_history"][0]["metadata"] = {"note": secret}


def _tool_call_arguments(document: dict[str, Any], secret: str) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": secret}}
    document["context"]["conversation_history"].append(
        {"role": "assistant", "content": None, "tool_calls": [call]}
    )


def _artifact_field(document: dict[str, Any], secret: str) -> None:
    document["context"]["artifacts"]["plan"]["description"] = secret


def _project_description(document: dict[str, Any], secret: str) -> None:
    document["project"]["description"] = secret


def _vendor_field(document: dict[str, Any], secret: str) -> None:
    document["x_vendor"] = {"notes": [secret]}


def _object_key(document: dict[str, Any], secret: str) -> None:
    document["context"]["artifacts"][secret] = {"content": "keyed by a secret"}


def _message_content(document: dict[str, Any], secret: str) -> None:
    document["context"]["conversation_history"][1]["content"] = f"see {secret} here"


def _phase_status(document: dict[str, Any], secret: str) -> None:
    document["phases"]["status"]["design"] = secret  # invalid: a warning names it


def _phase_name(document: dict[str, Any], secret: str) -> None:
    document["phases"]["status"][secret] = "unknown"  # a warning's path names it


SAVE_POSITIONS: dict[str, Callable[[dict[str, Any], str], None]] = {
    "message_content": _message_content,
    "message_metadata": _message_metadata,
    "tool_call_arguments": _tool_call_arguments,
    "artifact_field": _artifact_field,
    "project_description": _project_description,
    "vendor_field": _vendor_field,
    "object_key": _object_key,
    "phase_status": _phase_status,
    "phase_name": _phase_name,
}


@pytest.mark.parametrize("position", sorted(SAVE_POSITIONS))
@pytest.mark.parametrize("kind", KINDS)
def test_no_secret_of_a_save_survives(client, engine, tenant, project, caplog, kind, position):
    caplog.set_level(logging.DEBUG)
    written, sensitive = SECRETS[kind]
    document = seed_save()
    SAVE_POSITIONS[position](document, written)
    first_record = len(caplog.records)
    receipt, replay = _twice(
        client, lambda headers: import_save(client, project, document, headers=headers), kind
    )
    assert receipt.status_code == 201, receipt.text
    if position == "phase_status":  # replaced by its default: only the warning names it
        assert "[REDACTED:" in receipt.json()["warnings"][0]["message"], receipt.text
    else:
        assert receipt.json()["redactions"], receipt.text
    assert all(entry["path"].startswith("/") for entry in receipt.json()["redacted"])
    exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}")
    listing = client.get(f"/v1/projects/{project}/saves")
    stored = stored_strings(engine, tenant, project)
    assert any("[REDACTED:" in value for value in stored), "the scan did not reach the save"
    _assert_nowhere(
        sensitive,
        {
            "receipt": [receipt.text],
            "replay": [replay.text],
            "export": [exported.text, listing.text],
            "database": stored,
            "logs": _logs(caplog, first_record),
        },
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_named_secret_field_is_redacted_whole(client, engine, tenant, project, kind):
    """``{"password": "<anything>"}`` as a JSON member, not text: the name marks the value."""
    _written, sensitive = SECRETS[kind]
    document = seed_save()
    document["configuration"]["credentials"] = {"password": sensitive, "api_key": sensitive}
    document["context"]["conversation_history"][0]["metadata"] = {"Authorization": sensitive}
    receipt = import_save(client, project, document)
    assert receipt.status_code == 201, receipt.text
    paths = {entry["path"] for entry in receipt.json()["redacted"]}
    assert {"/configuration/credentials/password", "/configuration/credentials/api_key"} <= paths
    exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}")
    _assert_nowhere(
        sensitive, {"export": [exported.text], "database": stored_strings(engine, tenant, project)}
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_version_never_echoes_a_secret(client, engine, tenant, project, caplog, kind):
    caplog.set_level(logging.DEBUG)
    written, sensitive = SECRETS[kind]
    document = seed_save() | {"version": written}
    first_record = len(caplog.records)
    refused = import_save(client, project, document, headers={"Idempotency-Key": "v"})
    problem = assert_problem(refused, 422)
    assert "/version" in json.dumps(problem)
    _assert_nowhere(sensitive, {"problem": [refused.text], "logs": _logs(caplog, first_record)})


# Every other format, through the archive import: (archive path, where the text goes).
def _set_text(member: str) -> Callable[[Any, str], None]:
    """A function that puts a secret into a documented free-text field of ``member``."""

    def set_in(parsed: Any, secret: str) -> None:
        match member:
            case "snapshot":
                parsed["messages"][1]["content"] = secret
            case "atari":
                parsed["history"]["bd-002"]["last_error"] = secret
            case "feature":
                parsed["handover_notes"]["history"][0]["message"] = secret
            case "summary":
                parsed["content"] = secret
            case "decisions" | "constraints":
                parsed[0]["description" if member == "constraints" else "rationale"] = secret
            case "failures":
                parsed[0]["root_cause"] = secret
            case "raw_traces":
                parsed[0]["content"] = secret
            case "episodic":
                parsed[0]["summary"] = secret
            case "semantic":
                parsed[0]["fact"] = secret

    return set_in


MEMBERS = {
    "snapshot": "/working_context_snapshot.json",
    "raw_traces": "/raw_traces.jsonl",
    "episodic": "/episodic.jsonl",
    "semantic": "/semantic.jsonl",
    "atari": ".atari/state.json",
    "atari_backup": ".atari/state.json.backup",
    "feature": "/context.json",
    "summary": "running-summary.json",
    "decisions": "key-decisions.json",
    "failures": "failure-memory.json",
    "constraints": "active-constraints.json",
}


def _member_path(member: str) -> str:
    suffix = MEMBERS[member]
    matches = [path for path in golden_workspace() if path.endswith(suffix)]
    return sorted(matches)[0]


def _with_secret(member: str, position: str, secret: str) -> tuple[str, bytes]:
    path = _member_path(member)
    raw = golden_workspace()[path]
    if member == "atari_backup":  # a file atari could not read, kept as bytes
        return path, raw + f" {{{json.dumps('x_vendor')}: {json.dumps(secret)}}}".encode()
    is_lines = path.endswith(".jsonl")
    parsed: Any = (
        [json.loads(line) for line in raw.splitlines() if line.strip()]
        if is_lines
        else json.loads(raw)
    )
    if position == "text":
        _set_text(member)(parsed, secret)
    else:
        target = parsed[0] if isinstance(parsed, list) else parsed
        target["x_vendor"] = {secret: "keyed"} if position == "key" else {"note": secret}
    if is_lines:
        return path, b"".join(json.dumps(item).encode() + b"\n" for item in parsed)
    indent = 2 if raw.lstrip().startswith((b"{\n", b"[\n")) else None
    return path, json.dumps(parsed, indent=indent, ensure_ascii=False).encode()


# Every kind in each format's text; in the fields and keys a format does not document, a kind of
# each family (a token, a quoted name, a URL) in the suite and every kind under `make soak`.
ARCHIVE_CASES = [
    (kind, position)
    for position in ("text", "vendor_field", "key")
    for kind in KINDS
    if position == "text" or SOAK > 1 or kind in ("api_key", "json_quoted_key", "url_credentials")
]


@pytest.mark.parametrize("member", sorted(MEMBERS))
@pytest.mark.parametrize(("kind", "position"), ARCHIVE_CASES)
def test_no_secret_of_any_format_survives_an_archive_import(
    client, engine, tenant, project, caplog, kind, member, position
):
    caplog.set_level(logging.DEBUG)
    written, sensitive = SECRETS[kind]
    path, content = _with_secret(member, position, written)
    members = {path: content}
    if member == "atari_backup":  # a backup goes beside its run's state
        state = _member_path("atari")
        members = {state: golden_workspace()[state], path: content}
    archive = tar_gz(members)
    url = f"/v1/projects/{project}/archive"
    first_record = len(caplog.records)
    report, replay = _twice(
        client,
        lambda headers: client.post(
            url, content=archive, headers={"Content-Type": "application/gzip", **headers}
        ),
        f"{kind}-{member}-{position}",
    )
    assert report.status_code == 200, report.text
    if position == "text":
        assert [item["path"] for item in report.json()["imported"]] == list(members), report.text
    exported = client.get(url)
    assert exported.status_code == 200
    files = untar(exported.content)
    stored = stored_strings(engine, tenant, project)
    if position == "text":
        assert any("[REDACTED:" in value for value in stored), "the scan did not reach the file"
    _assert_nowhere(
        sensitive,
        {
            "report": [report.text],
            "replay": [replay.text],
            "export": [content.decode("utf-8", "replace") for content in files.values()],
            "database": stored,
            "logs": _logs(caplog, first_record),
        },
    )


def test_the_document_written_is_the_redacted_one(client, project):
    """Redaction keeps each file valid for its tool: the exported file parses, and a secret in
    a save's text becomes the marker where it stood."""
    written, _sensitive = SECRETS["api_key"]
    document = seed_save()
    _message_content(document, written)
    receipt = import_save(client, project, document)
    exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}").json()
    content = exported["context"]["conversation_history"][1]["content"]
    assert content == "see [REDACTED:api_key] here"
    document["context"]["conversation_history"][1]["content"] = content
    assert python_indent2(exported) == python_indent2(document)


def test_every_write_reports_its_redactions_in_a_header(client, project):
    """A format whose receipt has no list of its own: the header names kind and pointer."""
    written, _sensitive = SECRETS["url_credentials"]
    path, content = _with_secret("snapshot", "text", written)
    agent = path.split("/")[2]
    url = f"/v1/projects/{project}/agents/{agent}/working-context-snapshot"
    stored = client.put(url, content=content, headers={"Content-Type": "application/json"})
    assert stored.status_code == 201, stored.text
    assert json.loads(stored.headers["Redactions"]) == {
        "counts": {"url_credential": 1},
        "sites": [{"path": "/messages/1/content", "kind": "url_credential", "count": 1}],
    }
    clean = client.put(
        url, content=golden_workspace()[path], headers={"Content-Type": "application/json"}
    )
    assert "Redactions" not in clean.headers


def test_redaction_can_be_turned_off_for_documents_but_never_for_messages(backend, caplog):
    """``CONTEXT_STORE_REDACT=false`` stores a file as its tool wrote it; a problem still never
    quotes the secret."""
    url = backend.new_database_url()
    upgrade(url)
    with TestClient(create_app(make_settings(url, redact=False))) as application:
        client = client_for(application.app, create_key(application.app, "t-off"))
        written, sensitive = SECRETS["api_key"]
        document = seed_save()
        _message_content(document, written)
        receipt = import_save(client, "p", document)
        assert receipt.status_code == 201, receipt.text
        assert receipt.json()["redactions"] == {}
        exported = client.get(f"/v1/projects/p/saves/{receipt.json()['id']}")
        assert sensitive in exported.text
        refused = import_save(client, "p", seed_save() | {"version": written})
        assert sensitive not in assert_problem(refused, 422)["detail"]


@pytest.mark.parametrize("kind", ["api_key", "url_credentials"])
@pytest.mark.parametrize(
    ("method", "route", "media_type"),
    [("PUT", "state", "application/json"), ("POST", "state:load", "application/octet-stream")],
    ids=["stored", "loaded"],
)
def test_a_key_written_twice_is_never_quoted_with_its_secret(
    client, project, caplog, kind, method, route, media_type
):
    """atari refuses a state with a key written twice, naming it in the problem's ``detail``
    and ``errors``; a load sets such a file aside, and its answer's reason names it: without
    an Idempotency-Key as with one."""
    caplog.set_level(logging.DEBUG)
    written, sensitive = SECRETS[kind]
    key = json.dumps(written)
    body = f'{{"version": 2, {key}: 1, {key}: 2}}'.encode()
    first_record = len(caplog.records)
    answer = client.request(
        method,
        f"/v1/projects/{project}/runs/r1/{route}",
        content=body,
        headers={"Content-Type": media_type},
    )
    if route == "state":
        assert assert_problem(answer, 422)["errors"], answer.text
    else:
        assert answer.status_code == 200 and answer.json()["outcome"] == "reset", answer.text
    _assert_nowhere(sensitive, {"answer": [answer.text], "logs": _logs(caplog, first_record)})


@pytest.mark.parametrize("kind", ["api_key", "cloud_access_key"])
def test_an_archive_report_never_quotes_a_secret_in_a_member_path(client, project, kind):
    """Members refused or skipped are reported by their path, which the client chose."""
    written, sensitive = SECRETS[kind]
    archive = tar_gz({f"features/{written}/context.json": b"{}", f"x/{written}": b"{}"})
    report = client.post(
        f"/v1/projects/{project}/archive",
        content=archive,
        headers={"Content-Type": "application/gzip"},
    )
    assert report.status_code == 200, report.text
    assert report.json()["refused"] or report.json()["skipped"], report.text
    _assert_nowhere(sensitive, {"answer": [report.text]})


NAMED_SECRETS = ["api_key", "cloud_access_key"]


@pytest.mark.parametrize("kind", NAMED_SECRETS)
def test_an_idempotency_key_that_holds_a_secret_is_refused_never_stored(
    client, engine, tenant, project, kind
):
    """An Idempotency-Key is stored as it is, to find the first answer by: one that holds a
    secret is a 422 at the header, and nothing is stored under it."""
    written, sensitive = SECRETS[kind]
    url = f"/v1/projects/{project}/memory/decisions"
    assert client.post(url, json={"id": "dec-0", "decision": "x"}).is_success
    refused = client.post(
        url, json={"id": "dec-1", "decision": "x"}, headers={"Idempotency-Key": written}
    )
    problem = assert_problem(refused, 422)
    assert [error["path"] for error in problem["errors"]] == ["header.idempotency-key"]
    _assert_nowhere(sensitive, {"problem": [refused.text]})
    _assert_nowhere(sensitive, {"database": stored_strings(engine, tenant, project)})
    with engine.connect() as connection:
        keys = connection.execute(text("SELECT key FROM idempotency_keys")).scalars().all()
    _assert_nowhere(sensitive, {"idempotency keys": keys})


@pytest.mark.parametrize("kind", NAMED_SECRETS)
def test_a_key_label_that_holds_a_secret_is_stored_redacted(client, kind):
    written, sensitive = SECRETS[kind]
    created = client.post("/v1/admin/keys", json={"scopes": ["read"], "name": f"ci {written}"})
    assert created.status_code == 201, created.text
    _assert_nowhere(
        sensitive, {"answer": [created.text], "listing": [client.get("/v1/admin/keys").text]}
    )


# A hostile client's decision: the header said {"password": 2} and all seven values came back
# (the two reported were the "=" of ":=" and the ">" of "=>", the values beside them kept).
HOSTILE_DECISION = {
    "decision": (
        'PGPASSWORD=Hunter2Prod99 psql; password := "Hunter2Prod98"; '
        "'password' => 'Hunter2Prod97'; dbPassword=Hunter2Prod96"
    ),
    "cfg": {
        "dbPassword": "Hunter2Prod95",
        "smtpPassword": "Hunter2Prod94",
        "password": ["Hunter2Prod93"],
    },
}


def test_a_password_in_any_style_never_survives_a_decision(client, engine, tenant, project, caplog):
    """Each of the seven values is replaced where it stood, and the header counts the seven,
    at their pointers, and nothing else."""
    caplog.set_level(logging.DEBUG)
    first_record = len(caplog.records)
    url = f"/v1/projects/{project}/memory/decisions"
    created = client.post(url, json=HOSTILE_DECISION)
    assert created.status_code == 201, created.text
    assert json.loads(created.headers["Redactions"]) == {
        "counts": {"password": 7},
        "sites": [
            {"path": "/decision", "kind": "password", "count": 4},
            {"path": "/cfg/dbPassword", "kind": "password", "count": 1},
            {"path": "/cfg/smtpPassword", "kind": "password", "count": 1},
            {"path": "/cfg/password/0", "kind": "password", "count": 1},
        ],
    }
    stored_file = client.get(f"/v1/projects/{project}/memory/files/key-decisions.json")
    assert stored_file.status_code == 200, stored_file.text
    [item] = stored_file.json()
    marker = "[REDACTED:password]"
    assert item["decision"] == (
        f'PGPASSWORD={marker} psql; password := "{marker}"; '
        f"'password' => '{marker}'; dbPassword={marker}"
    )
    assert item["cfg"] == {"dbPassword": marker, "smtpPassword": marker, "password": [marker]}
    assert created.json()["item"] == item
    _assert_nowhere(
        "Hunter2Prod9",
        {
            "answer": [created.text],
            "file": [stored_file.text],
            "database": stored_strings(engine, tenant, project),
            "logs": _logs(caplog, first_record),
        },
    )
