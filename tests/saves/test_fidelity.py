"""MDAN-AUTO saves as MDAN-AUTO writes them (``json.dump(state, f, indent=2)`` into
``mdan-save-<seconds>.json``): what Python's ``json`` writes (integers of any size, NaN,
Infinity) and the file's own name survive import, download, the archive and push/pull, and a
second push of the same directory stores nothing new.

The saves are the golden workspace's, written by ``tests/formats/generators/mdan_saves.py``.
"""

import hashlib
import json
import stat
from pathlib import Path

import pytest
from blake3 import blake3
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import Engine, MetaData, select

from app.cli import pull_directory, push_directory
from app.client import ContextStoreClient
from app.core.conditional import etag_of
from app.core.config import Settings
from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import GOLDEN, assert_problem, import_save, seed_save, tar_gz, untar

GOLDEN_SAVES = GOLDEN / "workspace" / "mdan"
SEED_NAME = "mdan-save-1705310400.json"
BIG_INT_NAME = "mdan-save-1705314300.json"
NAN_NAME = "mdan-save-1705314400.json"
SECRET_NAME = "mdan-save-1705314500.json"
# The made-up key the generator wrote into SECRET_NAME.
FAKE_KEY = b"sk-proj-Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1"


def _golden(name: str) -> bytes:
    return (GOLDEN_SAVES / name).read_bytes()


def _golden_names() -> list[str]:
    return sorted(path.name for path in GOLDEN_SAVES.glob("mdan-save-*.json"))


def _as_stored(content: bytes) -> bytes:
    """The documented difference: a secret becomes its redaction marker, where it stood."""
    return content.replace(FAKE_KEY, b"[REDACTED:api_key]")


def _url(project: str, suffix: str = "") -> str:
    return f"/v1/projects/{project}/saves{suffix}"


def _import_named(client, project: str, name: str):
    return import_save(client, project, _golden(name), params={"filename": name})


@pytest.mark.parametrize("name", _golden_names())
def test_every_golden_save_round_trips_byte_for_byte(client, project, name):
    imported = _import_named(client, project, name)
    assert imported.status_code == 201, imported.text
    assert imported.json()["filename"] == name
    downloaded = client.get(_url(project, f"/{imported.json()['id']}"))
    assert downloaded.content == _as_stored(_golden(name))
    assert f'filename="{name}"' in downloaded.headers["content-disposition"]


def test_a_20_digit_integer_is_kept_and_its_column_is_null(client, project):
    imported = import_save(client, project, _golden(BIG_INT_NAME))
    assert imported.status_code == 201, imported.text
    warnings = {w["path"]: w["message"] for w in imported.json()["warnings"]}
    # Nothing replaced: the receipt only says which listed columns cannot hold the value.
    assert "default" not in " ".join(warnings.values())
    assert set(warnings) == {"/context/token_usage/total", "/metadata/save_count"}
    assert all("kept as written" in message for message in warnings.values())
    assert client.get(imported.headers["location"]).content == _golden(BIG_INT_NAME)
    [summary] = client.get(_url(project)).json()["items"]
    assert summary["save_count"] is None
    assert summary["token_percentage"] == 0.8


def test_nan_and_infinity_are_kept(client, project):
    imported = import_save(client, project, _golden(NAN_NAME))
    assert imported.status_code == 201, imported.text
    pointers = {w["path"] for w in imported.json()["warnings"]}
    assert pointers == {"/context/token_usage/limit", "/context/token_usage/percentage"}
    assert client.get(imported.headers["location"]).content == _golden(NAN_NAME)
    [summary] = client.get(_url(project)).json()["items"]
    assert summary["token_percentage"] is None


def test_the_client_sends_the_name(client, project):
    store = ContextStoreClient(http=client)
    receipt = store.import_save(project, _golden(SEED_NAME), filename=SEED_NAME)
    assert receipt.filename == SEED_NAME
    assert store.export_save(project, receipt.id).filename == SEED_NAME


def test_a_save_without_a_name_is_named_after_its_timestamp(client, project):
    receipt = import_save(client, project, seed_save()).json()
    assert receipt["filename"] == "mdan-save-1705314225.json"


@pytest.mark.parametrize(
    "filename", ["save.json", "mdan-save-.json", "mdan-save-12.json.gz", "mdan-save-1" + "0" * 41]
)
def test_a_name_that_is_not_a_save_files_is_a_422(client, project, filename):
    response = import_save(client, project, seed_save(), params={"filename": filename})
    body = assert_problem(response, 422)
    assert [error["path"] for error in body["errors"]] == ["query.filename"]


def test_resume_counts_past_64_bits_as_python_does(client, project):
    document = seed_save()
    document["metadata"]["resume_count"] = 2**63 - 1
    save_id = import_save(client, project, document).json()["id"]
    resumed = client.post(_url(project, f"/{save_id}/resume"))
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["save"]["metadata"]["resume_count"] == 2**63
    document["metadata"]["resume_count"] = 2**63
    assert client.get(_url(project, f"/{save_id}")).content == json.dumps(
        document, indent=2
    ).encode("ascii")
    assert client.get(_url(project)).json()["items"][0]["resume_count"] is None


def test_the_archive_keeps_each_saves_name(client, project):
    members = {f"mdan/{name}": _golden(name) for name in _golden_names()}
    report = client.post(
        f"/v1/projects/{project}/archive",
        content=tar_gz(members),
        headers={"Content-Type": "application/gzip"},
    ).json()
    assert report["refused"] == []
    assert {member["path"] for member in report["imported"]} == set(members)
    # Nothing filled in or renamed: only the redaction and the columns that show null.
    messages = [warning["message"] for warning in report["warnings"]]
    assert "1 secret(s) of kind api_key redacted" in messages
    assert not [m for m in messages if "default" in m or "exported as" in m], messages
    exported = untar(client.get(f"/v1/projects/{project}/archive").content)
    assert exported == {path: _as_stored(content) for path, content in members.items()}


def _write(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


def test_push_twice_stores_one_copy_and_pull_gives_back_the_names(client, project, tmp_path):
    files = {f"mdan/{name}": _golden(name) for name in _golden_names()}
    _write(tmp_path / "workspace", files)
    store = ContextStoreClient(http=client)
    first = push_directory(store, tmp_path / "workspace", project)
    assert {member.action for member in first.imported} == {"created"}
    second = push_directory(store, tmp_path / "workspace", project)
    assert second.refused == []
    assert {member.path: member.action for member in second.imported} == dict.fromkeys(
        files, "unchanged"
    )
    assert len(client.get(_url(project)).json()["items"]) == len(files)

    pull_directory(store, tmp_path / "pulled", project)
    pulled = {
        path.relative_to(tmp_path / "pulled").as_posix(): path.read_bytes()
        for path in (tmp_path / "pulled").rglob("*")
        if path.is_file()
    }
    assert pulled == {path: _as_stored(content) for path, content in files.items()}


def test_the_same_content_under_another_name_is_another_save(client, project):
    seed = _golden(SEED_NAME)
    archive = tar_gz({f"mdan/{SEED_NAME}": seed, "mdan/mdan-save-1705310401.json": seed})
    headers = {"Content-Type": "application/gzip"}
    report = client.post(f"/v1/projects/{project}/archive", content=archive, headers=headers)
    assert [member["action"] for member in report.json()["imported"]] == ["created", "created"]


def _plain_digests(content: bytes) -> set[bytes]:
    """Digests anyone holding a guess of the bytes could compute: SHA-256, BLAKE2b and BLAKE3
    (hex and raw) of the bytes, and the ETag those bytes would have."""
    digests = {etag_of(content).strip('"').encode()}
    for raw in (
        hashlib.sha256(content).digest(),
        hashlib.blake2b(content, digest_size=16).digest(),
        blake3(content).digest(length=16),
    ):
        digests |= {raw, raw.hex().encode()}
    return digests


def _request_digest(method: str, path: str, query: str, body: bytes) -> bytes:
    digest = hashlib.sha256()
    for part in (method.encode(), path.encode(), query.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest().encode()


def _every_stored_value(engine: Engine) -> list[bytes]:
    metadata = MetaData()
    metadata.reflect(engine)
    values: list[bytes] = []
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            for row in connection.execute(select(table)):
                for value in row:
                    if isinstance(value, str):
                        values.append(value.encode("utf-8", "surrogatepass"))
                    elif isinstance(value, bytes | memoryview):
                        values.append(bytes(value))
    return values


def test_no_plain_digest_of_a_redacted_secret_is_stored(client, engine: Engine, project):
    secret_save = _golden(SECRET_NAME)
    archive = tar_gz({f"mdan/{SECRET_NAME}": secret_save})
    archive_path = f"/v1/projects/{project}/archive"
    for _attempt in range(2):  # the retry replays: both go through the fingerprint
        pushed = client.post(
            archive_path,
            content=archive,
            headers={"Content-Type": "application/gzip", "Idempotency-Key": "push-1"},
        )
        assert pushed.status_code == 200, pushed.text
    posted = import_save(
        client,
        project,
        secret_save,
        params={"filename": SECRET_NAME},
        headers={"Idempotency-Key": "save-1"},
    )
    assert posted.status_code == 201, posted.text

    forbidden = _plain_digests(secret_save) | _plain_digests(archive)
    forbidden |= {
        _request_digest("POST", archive_path, "", archive),
        _request_digest("POST", _url(project), f"filename={SECRET_NAME}", secret_save),
    }
    stored = _every_stored_value(engine)
    assert not [value for value in stored if FAKE_KEY in value]
    leaks = [value for value in stored for digest in forbidden if digest in value]
    assert leaks == []


def test_replicas_sharing_the_fingerprint_key_replay_each_others_retries(database_url, project):
    """The key is a setting: every replica (and the same server after a restart) that has it
    recognises a retry; one with another key takes it for another request."""
    tenant = "t-replicas-" + project
    request = {
        "content": tar_gz({f"mdan/{SECRET_NAME}": _golden(SECRET_NAME)}),
        "headers": {"Content-Type": "application/gzip", "Idempotency-Key": "retry-me"},
    }
    responses = []
    for key in ("a" * 32, "a" * 32, "b" * 32):
        application = create_app(make_settings(database_url, fingerprint_key=key))
        with TestClient(application):  # its lifespan: engines up, then disposed of
            replica = client_for(application, create_key(application, tenant))
            responses.append(replica.post(f"/v1/projects/{project}/archive", **request))
    first, retried, other_key = responses
    assert first.status_code == retried.status_code == 200
    assert retried.headers["idempotent-replayed"] == "true"
    assert retried.content == first.content
    assert_problem(other_key, 422)


def test_a_short_fingerprint_key_is_refused():
    with pytest.raises(ValidationError, match="at least 32 characters"):
        Settings(fingerprint_key="too-short")
    # docker-compose passes an unset variable on as "": unset, not a short key.
    assert Settings(fingerprint_key="").fingerprint_key is None


def test_without_a_key_a_sqlite_server_keeps_one_beside_its_database(tmp_path, project):
    """`make run` sets no key: a retry after a restart is still recognised, because the key is
    kept in a file beside the SQLite database (mode 0600), never in the database."""
    database_url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(database_url)
    request = {
        "content": _golden(SECRET_NAME),
        "headers": {"Content-Type": "application/json", "Idempotency-Key": "retry-me"},
    }
    responses = []
    for _restart in range(2):
        application = create_app(make_settings(database_url))
        with TestClient(application):
            server = client_for(application, create_key(application, "t-restart-" + project))
            responses.append(server.post(f"/v1/projects/{project}/saves", **request))
    first, retried = responses
    assert first.status_code == retried.status_code == 201
    assert retried.headers["idempotent-replayed"] == "true"
    key_file = tmp_path / "store.db.fingerprint-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert key_file.read_bytes().strip() not in (tmp_path / "store.db").read_bytes()


def test_an_etag_is_the_files_blake3_as_migration_0016_made_every_saves_tag():
    """Stored tags outlive the code that made them: an archive pushed again recognises the saves
    it holds by their tag (``stored_copy``), so a save stored before a change of hash would be
    stored a second time. The hash changes only with a migration that rewrites the saves' tags
    (0016's test: the tags it makes are these)."""
    content = b'{\n  "version": "1.0"\n}'
    assert etag_of(content) == '"' + blake3(content).hexdigest(length=16) + '"'
