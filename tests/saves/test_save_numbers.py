"""A save's id is its number within its project: 1, 2, 3... whatever other tenants do.

The database's own primary key is one sequence across tenants; an id taken from it would tell
a tenant how many saves everyone else stored meanwhile.
"""

import threading
from contextlib import ExitStack

import httpx

from app.core.migrations import upgrade
from tests.helpers import assert_problem, import_save, seed_save
from tests.platform.servers import Server, create_key_in


def _save(second: int) -> dict:
    document = seed_save()
    document["timestamp"] = f"2024-01-15T10:{second // 60:02d}:{second % 60:02d}Z"
    return document


def _ids(client, project: str) -> list[int]:
    page = client.get(f"/v1/projects/{project}/saves", params={"limit": 500}).json()
    return sorted(item["id"] for item in page["items"])


def test_each_projects_ids_count_from_1_whatever_other_tenants_store(client, other_client, project):
    receipts: dict[str, list[dict]] = {"mine": [], "theirs": [], "my other": []}
    for _round in range(4):
        # Interleaved: another tenant's project of the same name, and another of my projects.
        for who, api, name in (
            ("mine", client, project),
            ("theirs", other_client, project),
            ("theirs", other_client, project),
            ("my other", client, project + "-b"),
        ):
            response = import_save(api, name, _save(len(receipts[who])))
            assert response.status_code == 201, response.text
            receipts[who].append(response.json())
    assert [r["id"] for r in receipts["mine"]] == [1, 2, 3, 4]
    assert [r["id"] for r in receipts["theirs"]] == list(range(1, 9))
    assert [r["id"] for r in receipts["my other"]] == [1, 2, 3, 4]
    assert _ids(client, project) == [1, 2, 3, 4]
    assert _ids(other_client, project) == list(range(1, 9))
    # The same saves give the same pages. Their cursors are not the same text, each sealed for
    # its own project (which refuses the other's), but they are as long, and each leads to
    # the same next save: the cursor says nothing of other tenants either (what it holds is
    # unreadable: tests/platform/test_cursors.py).
    mine = client.get(f"/v1/projects/{project}/saves", params={"limit": 1}).json()
    alone = import_save(client, project + "-c", _save(0)).json()
    assert alone["id"] == 1
    for second in range(1, 4):
        import_save(client, project + "-c", _save(second))
    same = client.get(f"/v1/projects/{project}-c/saves", params={"limit": 1}).json()
    assert len(mine["next_cursor"]) == len(same["next_cursor"])
    assert mine["items"][0]["id"] == same["items"][0]["id"] == 4
    following = [
        client.get(f"/v1/projects/{name}/saves", params={"limit": 1, "cursor": cursor}).json()
        for name, cursor in ((project, mine["next_cursor"]), (project + "-c", same["next_cursor"]))
    ]
    assert [page["items"][0]["id"] for page in following] == [3, 3]
    refused = client.get(f"/v1/projects/{project}-c/saves", params={"cursor": mine["next_cursor"]})
    assert_problem(refused, 422)


def test_every_route_takes_the_number_and_a_deleted_number_is_never_reused(client, project):
    url = f"/v1/projects/{project}/saves"
    first = import_save(client, project, _save(0))
    assert first.headers["location"] == f"{url}/1"
    second = import_save(client, project, _save(1)).json()
    assert second["id"] == 2
    assert client.get(f"{url}/2").json()["timestamp"] == "2024-01-15T10:00:01Z"
    resumed = client.post(f"{url}/2/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["id"] == 2
    assert client.delete(f"{url}/2").status_code == 204
    # The newest save gone, the next one still does not take its number.
    third = import_save(client, project, _save(2))
    assert third.json()["id"] == 3
    assert third.headers["location"] == f"{url}/3"
    assert_problem(client.get(f"{url}/2"), 404)
    assert_problem(client.post(f"{url}/2/resume"), 404)
    assert_problem(client.delete(f"{url}/2"), 404)
    assert client.post(f"{url}:prune", json={"keep_latest": 0}).json() == {"deleted": 2}
    assert import_save(client, project, _save(3)).json()["id"] == 4
    assert _ids(client, project) == [4]


def test_another_tenants_number_finds_nothing(client, other_client, project):
    import_save(other_client, project, _save(0))
    assert_problem(client.get(f"/v1/projects/{project}/saves/1"), 404)
    import_save(client, project, _save(5))
    assert client.get(f"/v1/projects/{project}/saves/1").json()["timestamp"].endswith(":05Z")


THREADS = 6
IMPORTS = 4  # per thread


def test_concurrent_imports_into_one_project_get_distinct_numbers(backend, tmp_path):
    """Two server processes on one database, many clients importing into one project: every
    import is acknowledged with a number of its own, and the numbers are 1..n."""
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "numbers")
    other_key = create_key_in(database_url, "other")
    ids: list[int] = []
    failures: list[str] = []
    lock = threading.Lock()
    with ExitStack() as stack:
        servers = []
        for n in range(2):
            server = Server(database_url, tmp_path / f"server-{n}.log")
            stack.callback(server.stop)
            server.start()
            servers.append(server)
        # Another tenant's save first: the database's own keys no longer start at 1.
        with httpx.Client(
            base_url=servers[0].url, headers={"Authorization": f"Bearer {other_key}"}
        ) as other:
            assert import_save(other, "shared", _save(0)).status_code == 201

        def work(thread: int) -> None:
            with httpx.Client(
                base_url=servers[thread % 2].url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            ) as api:
                for n in range(IMPORTS):
                    response = import_save(api, "shared", _save(thread * IMPORTS + n))
                    with lock:
                        if response.status_code == 201:
                            ids.append(response.json()["id"])
                        else:
                            failures.append(f"{response.status_code} {response.text[:200]}")

        threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert not failures, failures[:5]
    assert sorted(ids) == list(range(1, THREADS * IMPORTS + 1))
