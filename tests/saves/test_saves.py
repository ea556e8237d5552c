"""Saves through the API, on SQLite and PostgreSQL."""

import dataclasses
import gzip
import json
import logging
import random
import string
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import text

from app.saves import service as saves_service
from tests.helpers import (
    assert_problem,
    golden_bytes,
    hold_first_call,
    import_save,
    one_turn_without_wait,
    python_indent2,
    seed_save,
)


def _url(project: str, suffix: str = "") -> str:
    return f"/v1/projects/{project}/saves{suffix}"


def test_the_seed_example_round_trips_byte_for_byte(client, project):
    receipt = import_save(client, project, golden_bytes("mdan-save-seed-example.json"))
    assert receipt.status_code == 201
    body = receipt.json()
    assert body == {
        "id": body["id"],
        "filename": "mdan-save-1705314225.json",
        "timestamp": "2024-01-15T10:23:45Z",
        "size_bytes": len(python_indent2(seed_save())),
        "warnings": [],
        "warnings_truncated": False,
        "redactions": {},
        "redacted": [],
        "redacted_truncated": False,
        "pruned": 0,
    }
    assert receipt.headers["location"] == _url(project, f"/{body['id']}")
    exported = client.get(receipt.headers["location"], headers={"Accept-Encoding": "identity"})
    assert exported.content == python_indent2(seed_save())
    assert exported.headers["content-type"] == "application/json"
    assert exported.headers["content-disposition"] == (
        'attachment; filename="mdan-save-1705314225.json"'
    )
    assert client.get(_url(project, "/latest")).content == exported.content


def test_a_path_ending_in_a_newline_gets_a_location_without_it(client, project):
    # Starlette's route patterns end in ``$``, which Python also matches before a final
    # newline: the save is stored, and its Location must still be a valid header value.
    receipt = client.post(
        _url(project, "%0A"),
        content=golden_bytes("mdan-save-seed-example.json"),
        headers={"Content-Type": "application/json"},
    )
    assert receipt.status_code == 201, receipt.text
    assert receipt.headers["location"] == _url(project, f"/{receipt.json()['id']}")


def test_unknown_fields_and_non_ascii_survive(client, project):
    document = seed_save()
    document["x_tool_field"] = {"nested": [1, 2.5, None, True], "ünï": "çødé 😀"}
    document["context"]["conversation_history"][0]["extra"] = "kept"
    saved = import_save(client, project, document).json()
    assert client.get(_url(project, f"/{saved['id']}")).content == python_indent2(document)


def test_defaults_are_reported_as_warnings_and_stored(client, project):
    document = seed_save()
    del document["configuration"]["log_level"]
    document["metadata"]["resume_count"] = "zero"
    receipt = import_save(client, project, document).json()
    assert receipt["warnings"] == [
        {"path": "/configuration/log_level", "message": "missing; default 'INFO' used"},
        {"path": "/metadata/resume_count", "message": "invalid, an integer expected; default used"},
    ]
    stored = client.get(_url(project, f"/{receipt['id']}")).json()
    assert stored["configuration"]["log_level"] == "INFO"
    assert stored["metadata"]["resume_count"] == 0


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"version": "2.0"}', 422),
        (b"[1, 2]", 422),
        (b'"a string"', 422),
        (b'{"version": "1.0",', 400),
        (b"\xff\xfe\xfa", 400),
        (b"", 400),
    ],
)
def test_bad_saves_are_refused_and_store_nothing(client, project, content, status):
    import_save(client, project, seed_save())
    assert_problem(import_save(client, project, content), status)
    assert len(client.get(_url(project)).json()["items"]) == 1


def test_version_refusal_points_at_the_version(client, project):
    body = assert_problem(import_save(client, project, {"version": "0.9"}), 422)
    assert body["errors"] == [{"path": "/version", "message": "must be '1.0'"}]


def test_a_gzip_file_body_is_accepted(client, project):
    compressed = gzip.compress(python_indent2(seed_save()))
    response = client.post(
        _url(project), content=compressed, headers={"Content-Type": "application/gzip"}
    )
    assert response.status_code == 201, response.text
    exported = client.get(_url(project, "/latest"))
    assert exported.content == python_indent2(seed_save())


def test_export_is_gzip_when_asked(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    response = client.get(_url(project, f"/{save_id}"), headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert response.content == python_indent2(seed_save())  # httpx decoded it


SECRETS = {
    "api_key": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "cloud_access_key": "AKIAIOSFODNN7EXAMPLE",
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1rwW1gFWFOEjXk"
    ),
    "private_key": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"
    ),
    "password": "hunter2-correct-horse",
    "bearer_token": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5",
}


def _document_with_secrets() -> dict:
    document = seed_save()
    history = document["context"]["conversation_history"]
    history[1]["content"] = f"use key {SECRETS['api_key']} and AWS {SECRETS['cloud_access_key']}"
    history[2]["content"] = f"token {SECRETS['jwt']}"
    document["context"]["artifacts"]["plan"]["content"] = SECRETS["private_key"]
    document["context"]["decisions"][0]["rationale"] = f"db password={SECRETS['password']}"
    document["debates"][0]["arguments"]["dev"] = f"Authorization: Bearer {SECRETS['bearer_token']}"
    document["errors"] = [{"id": "e1", "message": f"failed with {SECRETS['api_key']}"}]
    return document


def test_secrets_are_redacted_before_storage(client, engine, project, caplog):
    caplog.set_level(logging.DEBUG)
    receipt = import_save(client, project, _document_with_secrets())
    assert receipt.status_code == 201
    assert receipt.json()["redactions"] == {
        "api_key": 2,
        "bearer_token": 1,
        "cloud_access_key": 1,
        "jwt": 1,
        "password": 1,
        "private_key": 1,
    }
    exported = client.get(_url(project, "/latest")).text
    with engine.connect() as connection:
        stored = b"".join(
            bytes(row.content) for row in connection.execute(text("SELECT content FROM saves"))
        )
    for kind, secret in SECRETS.items():
        for where, haystack in (
            ("receipt", receipt.text),
            ("export", exported),
            ("database", stored.decode("latin-1")),
            ("logs", caplog.text),
        ):
            assert secret not in haystack, f"{kind} secret found in the {where}"
    assert "[REDACTED:api_key]" in exported
    assert (
        "db password=[REDACTED:password]"
        in json.loads(exported)["context"]["decisions"][0]["rationale"]
    )


def test_list_filters_and_summaries(client, project):
    for stamp, phase in (
        ("2024-01-01T00:00:00Z", "PLAN"),
        ("2024-01-02T00:00:00Z", "IMPLEMENT"),
        ("2024-01-03T00:00:00Z", "IMPLEMENT"),
    ):
        document = seed_save()
        document["timestamp"] = stamp
        document["phases"]["current"] = phase
        import_save(client, project, document)
    items = client.get(_url(project), params={"phase": "IMPLEMENT"}).json()["items"]
    assert [i["timestamp"] for i in items] == ["2024-01-03T00:00:00Z", "2024-01-02T00:00:00Z"]
    assert items[0]["project_name"] == "MyProject"
    assert items[0]["token_percentage"] == 0.8
    assert items[0]["filename"] == "mdan-save-1704240000.json"
    window = client.get(
        _url(project), params={"since": "2024-01-02T00:00:00Z", "until": "2024-01-02T12:00:00Z"}
    ).json()["items"]
    assert [i["current_phase"] for i in window] == ["IMPLEMENT"]
    assert_problem(client.get(_url(project), params={"since": "not a date"}), 422)


def test_list_filters_by_file_name(client, project):
    """One save by its file name (the archive and the MCP resources address saves by name), in
    one query; two saves of one name (the same second) come newest first."""
    for stamp in ("2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z"):
        document = seed_save()
        document["timestamp"] = stamp
        import_save(client, project, document)
    again = seed_save()
    again["timestamp"] = "2024-01-02T00:00:00Z"
    again["phases"]["current"] = "IMPLEMENT"
    import_save(client, project, again)
    named = client.get(_url(project), params={"filename": "mdan-save-1704153600.json"}).json()
    assert [i["filename"] for i in named["items"]] == ["mdan-save-1704153600.json"] * 2
    assert named["items"][0]["current_phase"] == "IMPLEMENT"  # the newer of the two
    assert client.get(_url(project), params={"filename": "mdan-save-1.json"}).json() == {
        "items": [],
        "next_cursor": None,
    }
    for bad in ("x.json", "mdan-save-1.json.gz", "../mdan-save-1.json", ""):
        assert_problem(client.get(_url(project), params={"filename": bad}), 422)


def test_resume_counts_and_names_the_phase(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    resumed = client.post(_url(project, f"/{save_id}/resume"))
    assert resumed.status_code == 200
    body = resumed.json()
    assert body["resume_phase"] == "IMPLEMENT" and body["resume_count"] == 1
    assert body["save"]["metadata"]["resume_count"] == 1
    client.post(_url(project, f"/{save_id}/resume"))
    exported = client.get(_url(project, f"/{save_id}"))
    expected = seed_save()
    expected["metadata"]["resume_count"] = 2
    assert exported.content == python_indent2(expected)
    assert client.get(_url(project)).json()["items"][0]["resume_count"] == 2


def _running(monkeypatch, owner: Any, name: str) -> Callable[[], bool]:
    """``owner.name`` patched to mark its thread while it runs; whether the caller's thread is
    inside it now."""
    inside = threading.local()
    original = getattr(owner, name)

    def marked(*args, **kwargs):
        inside.on = True
        try:
            return original(*args, **kwargs)
        finally:
            inside.on = False

    monkeypatch.setattr(owner, name, marked)
    return lambda: getattr(inside, "on", False)


def test_a_resume_is_worked_out_before_its_write(client, project, monkeypatch):
    """A resume parses, renders, compresses and hashes its save before its write takes the
    writer (SQLite's one writer held seconds for a 30 MB save while every tenant waited); only
    a save changed between the read and the write is worked out again in it, and counts once
    more for each resume either way."""
    from app.storage import route

    rendered_in_write: list[bool] = []
    rendered = saves_service._rendered

    def recorded(document):
        rendered_in_write.append(writing())
        return rendered(document)

    save_id = import_save(client, project, seed_save()).json()["id"]
    writing = _running(monkeypatch, route.Writes, "run")
    monkeypatch.setattr(saves_service, "_rendered", recorded)
    resumed = client.post(_url(project, f"/{save_id}/resume"))
    assert resumed.status_code == 200, resumed.text
    assert rendered_in_write == [False]
    # The save changed between the read and the write (another resume, say): worked out again.
    prepare = saves_service.prepare_resume

    def stale(*args, **kwargs):
        prepared = prepare(*args, **kwargs)
        return dataclasses.replace(prepared, read_etag='"another version"')

    monkeypatch.setattr(saves_service, "prepare_resume", stale)
    rendered_in_write.clear()
    late = client.post(_url(project, f"/{save_id}/resume"))
    assert late.status_code == 200, late.text
    assert late.json()["resume_count"] == 2
    assert rendered_in_write == [False, True]
    # A retry under a key already answered is answered from the key: nothing worked out.
    keyed = {"Idempotency-Key": "resume-once"}
    first = client.post(_url(project, f"/{save_id}/resume"), headers=keyed)
    rendered_in_write.clear()
    again = client.post(_url(project, f"/{save_id}/resume"), headers=keyed)
    assert again.status_code == 200 and again.content == first.content
    assert rendered_in_write == []


@pytest.mark.parametrize("body", [None, b"{}"])
def test_a_resume_is_worked_out_outside_the_write_turns(client, project, monkeypatch, body):
    """Not only outside its write: outside the write turns, SQLite's one writer for every
    tenant, whatever its body (one sent without a body ran whole in a write turn)."""
    from app.core import write_turns

    prepared_in_turn: list[bool] = []
    prepare = saves_service.prepare_resume

    def recorded(*args, **kwargs):
        prepared_in_turn.append(in_turn())
        return prepare(*args, **kwargs)

    save_id = import_save(client, project, seed_save()).json()["id"]
    in_turn = _running(monkeypatch, write_turns.WriteTurns, "_write")
    monkeypatch.setattr(saves_service, "prepare_resume", recorded)
    headers = {} if body is None else {"Content-Type": "application/json"}
    resumed = client.post(_url(project, f"/{save_id}/resume"), content=body, headers=headers)
    assert resumed.status_code == 200, resumed.text
    assert prepared_in_turn == [False]


def test_missing_saves_are_404(client, project):
    import_save(client, project, seed_save())
    assert_problem(client.get(_url(project, "/999999")), 404)
    assert_problem(client.post(_url(project, "/999999/resume")), 404)
    assert_problem(client.delete(_url(project, "/999999")), 404)
    assert_problem(client.get(_url(project, "/not-a-number")), 422)


@pytest.mark.parametrize(
    "alias", ["+1", "%201", "1%20", "01_", "0_1", "%D9%A1", "1.0", "01", "0001"]
)
def test_a_save_id_is_its_digits_alone(client, project, alias):
    """Python's int() reads "+1", " 1", "01", "0_1" and Arabic-Indic "١" as 1: each was another
    name of save 1 (a helper's finding, "01" the review's). An id is ASCII digits, without a
    leading zero."""
    import_save(client, project, seed_save())
    body = assert_problem(client.get(_url(project, f"/{alias}")), 422)
    assert [error["path"] for error in body["errors"]] == ["path.save_id"]
    assert client.get(_url(project, "/1")).status_code == 200


def test_latest_of_an_empty_project_is_404(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    client.delete(_url(project, f"/{save_id}"))
    assert_problem(client.get(_url(project, "/latest")), 404)


def _complete(document: dict, stamp: str) -> dict:
    document["timestamp"] = stamp
    document["phases"]["status"] = dict.fromkeys(document["phases"]["status"], "complete")
    return document


def test_a_completed_save_deletes_the_older_ones(client, project):
    ids = []
    for day in (1, 2, 3):
        document = seed_save()
        document["timestamp"] = f"2024-01-0{day}T00:00:00Z"
        ids.append(import_save(client, project, document).json()["id"])
    done = import_save(client, project, _complete(seed_save(), "2024-01-02T12:00:00Z")).json()
    assert done["pruned"] == 2
    remaining = [i["id"] for i in client.get(_url(project)).json()["items"]]
    assert remaining == [ids[2], done["id"]]


def test_prune_keeps_the_newest(client, project):
    for day in range(1, 6):
        document = seed_save()
        document["timestamp"] = f"2024-01-0{day}T00:00:00Z"
        import_save(client, project, document)
    assert client.post(_url(project, ":prune"), json={"keep_latest": 2}).json() == {"deleted": 3}
    stamps = [i["timestamp"] for i in client.get(_url(project)).json()["items"]]
    assert stamps == ["2024-01-05T00:00:00Z", "2024-01-04T00:00:00Z"]
    assert client.post(_url(project, ":prune"), json={"keep_latest": 2}).json() == {"deleted": 0}


def test_prune_orders_saves_of_one_second_by_number_and_keeps_all_when_few(client, project):
    ids = [import_save(client, project, seed_save()).json()["id"] for _ in range(3)]
    assert client.post(_url(project, ":prune"), json={"keep_latest": 9}).json() == {"deleted": 0}
    assert client.post(_url(project, ":prune"), json={"keep_latest": 2}).json() == {"deleted": 1}
    assert [i["id"] for i in client.get(_url(project)).json()["items"]] == ids[:0:-1]


def test_pruning_a_project_never_written_is_404_and_creates_nothing(client, project):
    response = client.post(_url(project, ":prune"), json={"keep_latest": 0})
    assert assert_problem(response, 404)["detail"] == f"No project {project!r}."
    assert project not in [p["name"] for p in client.get("/v1/projects").json()["items"]]


def test_a_large_save_is_stored_compressed_and_round_trips(client, engine, project):
    document = seed_save()
    # 20 MB of varied text, so that compression has work to do.
    document["context"]["artifacts"]["big"] = {
        "file": "big.md",
        "content": "".join(f"line {n}: {n * 7919 % 104729}\n" for n in range(1_100_000)),
    }
    expected = python_indent2(document)
    assert len(expected) > 20_000_000
    receipt = import_save(client, project, expected)
    assert receipt.status_code == 201, receipt.text
    save_id = receipt.json()["id"]
    with engine.connect() as connection:
        stored = connection.execute(
            # The receipt's id is the save's number within its project.
            text(
                "SELECT content_gzipped, LENGTH(content) AS n FROM saves JOIN projects "
                "ON projects.id = saves.project_id WHERE projects.name = :p AND number = :i"
            ),
            {"p": project, "i": save_id},
        ).one()
    assert stored.content_gzipped and stored.n < len(expected) // 2
    plain = client.get(_url(project, f"/{save_id}"), headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert plain.content == expected
    zipped = client.get(_url(project, f"/{save_id}"), headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == expected


def test_automatic_retention_can_be_turned_off(database_url, tenant, project):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from tests.conftest import client_for, create_key, make_settings

    app = create_app(make_settings(database_url, saves_auto_prune=False))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        import_save(client, project, seed_save())
        done = import_save(client, project, _complete(seed_save(), "2024-02-01T00:00:00Z"))
        assert done.json()["pruned"] == 0
        assert len(client.get(_url(project)).json()["items"]) == 2


def _long_text(seed: int) -> str:
    """3,000 characters that compress poorly: PostgreSQL's index rows stop at 2,704 bytes."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(3000))


def test_texts_longer_than_an_index_holds_are_stored_whole_and_listed_cut(client, project):
    """A project name, a current phase and a phase name of 3,000 characters: a 500 on
    PostgreSQL before (its B-tree index rows), stored on SQLite. The file keeps them whole;
    the listing's columns their first 512 characters, and the receipt says so."""
    document = seed_save()
    name, phase, other = _long_text(1), _long_text(2), _long_text(3)
    document["project"]["name"] = name
    document["phases"]["current"] = phase
    document["phases"]["status"][other] = "pending"
    stored = import_save(client, project, document)
    assert stored.status_code == 201, stored.text
    warned = {w["path"]: w["message"] for w in stored.json()["warnings"]}
    assert warned["/project/name"].endswith("the saves listing holds the first 512 characters")
    assert "/phases/current" in warned
    assert warned["/phases/status"].startswith("1 phase name(s) kept as written")
    saves = f"/v1/projects/{project}/saves"
    assert client.get(f"{saves}/latest").content == python_indent2(document)
    listed = client.get(saves, params={"phase": phase}).json()["items"]
    assert [item["project_name"] for item in listed] == [name[:512]]
    statuses = client.get(saves, params={"phase": other[:512] + "x", "limit": 5})
    assert statuses.status_code == 200


def test_a_feature_context_with_a_long_phase_is_stored_and_listed(client, project):
    context = {"feature_id": "f", "current_phase": _long_text(4)}
    response = client.put(f"/v1/projects/{project}/features/f/context", json=context)
    assert response.status_code in (200, 201), response.text
    document = client.get(f"/v1/projects/{project}/features/f/context").json()
    assert document["current_phase"] == context["current_phase"]
    listed = client.get(f"/v1/projects/{project}/features").json()["items"]
    assert [item["current_phase"] for item in listed] == [context["current_phase"][:512]]


def test_a_tenants_save_imports_beyond_its_turns_wait_then_get_a_429(
    app, client, other_client, project, monkeypatch
):
    """A save's import runs in a worker thread for as long as its parse, redaction and
    compression take: a tenant's imports take turns, as its archive imports do, so that its
    64 MiB saves sent at once cannot take every thread from the others."""
    one_turn_without_wait(app.state.bulk_imports, monkeypatch)
    entered, release = hold_first_call(monkeypatch, saves_service, "prepare_save")
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(import_save, client, project, seed_save())
        assert entered.wait(30)
        refused = import_save(client, project, seed_save())
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
        assert import_save(other_client, project, seed_save()).status_code == 201
        release.set()
        assert first.result(30).status_code == 201
    assert import_save(client, project, seed_save()).status_code == 201


def test_a_retry_of_a_finished_import_is_answered_while_the_turns_are_taken(
    app, client, project, monkeypatch
):
    """Its Idempotency-Key's answer is read before the turn is waited for: a retry was told
    to wait, then to come back (a review's finding)."""
    one_turn_without_wait(app.state.bulk_imports, monkeypatch)
    headers = {"Idempotency-Key": "finished-1"}
    first = import_save(client, project, seed_save(), headers=headers)
    assert first.status_code == 201
    entered, release = hold_first_call(monkeypatch, saves_service, "prepare_save")
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(import_save, client, project, seed_save())
        assert entered.wait(30)
        retried = import_save(client, project, seed_save(), headers=headers)
        release.set()
        assert other.result(30).status_code == 201
    assert retried.status_code == 201 and retried.content == first.content
