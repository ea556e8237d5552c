"""Projects exist from their first write, list with counts, and delete with all they hold."""

from sqlalchemy import text

from app.projects.resources import PROJECT_RESOURCES
from tests.helpers import assert_problem, import_save, seed_save, wait_for_the_deleter


def test_no_project_before_the_first_write(client, project):
    assert client.get("/v1/projects").json() == {"items": [], "next_cursor": None}
    assert_problem(client.get(f"/v1/projects/{project}"), 404)
    # Reading does not create it.
    assert_problem(client.get(f"/v1/projects/{project}/saves"), 404)
    assert client.get("/v1/projects").json()["items"] == []


def test_a_project_is_listed_after_its_first_write(client, project):
    assert import_save(client, project, seed_save()).status_code == 201
    import_save(client, project, seed_save())
    items = client.get("/v1/projects").json()["items"]
    assert [item["name"] for item in items] == [project]
    # Every resource is counted; only saves were written.
    assert items[0]["counts"] == dict.fromkeys(PROJECT_RESOURCES, 0) | {"saves": 2}
    assert items[0]["created_at"] <= items[0]["last_write_at"]
    one = client.get(f"/v1/projects/{project}")
    assert one.json() == items[0]


def test_projects_list_newest_first(client, project):
    for suffix in ("1", "2", "3"):
        import_save(client, f"{project}-{suffix}", seed_save())
    names = [item["name"] for item in client.get("/v1/projects").json()["items"]]
    assert names == [f"{project}-3", f"{project}-2", f"{project}-1"]


def test_last_write_moves_on_each_write(client, project):
    import_save(client, project, seed_save())
    before = client.get(f"/v1/projects/{project}").json()
    import_save(client, project, seed_save())
    after = client.get(f"/v1/projects/{project}").json()
    assert after["created_at"] == before["created_at"]
    assert after["last_write_at"] > before["last_write_at"]


def _rows(engine, table: str, project_id: int) -> int:
    column = "project_id" if table != "save_phase_statuses" else None
    with engine.connect() as connection:
        if column:
            query = f"SELECT COUNT(*) FROM {table} WHERE project_id = :p"
        else:
            query = (
                "SELECT COUNT(*) FROM save_phase_statuses s JOIN saves v ON v.id = s.save_id "
                "WHERE v.project_id = :p"
            )
        return connection.execute(text(query), {"p": project_id}).scalar_one()


def _project_id(engine, tenant: str, name: str) -> int | None:
    with engine.connect() as connection:
        return connection.execute(
            text("SELECT id FROM projects WHERE tenant = :t AND name = :n"),
            {"t": tenant, "n": name},
        ).scalar()


def _orphans(engine) -> int:
    with engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT COUNT(*) FROM save_phase_statuses s "
                "WHERE NOT EXISTS (SELECT 1 FROM saves v WHERE v.id = s.save_id)"
            )
        ).scalar_one()


def test_deleting_a_project_deletes_everything_in_it(app, client, engine, tenant, project):
    import_save(client, project, seed_save())
    import_save(client, project, seed_save())
    import_save(client, project + "-kept", seed_save())
    project_id = _project_id(engine, tenant, project)
    assert project_id is not None
    assert _rows(engine, "saves", project_id) == 2
    assert _rows(engine, "save_phase_statuses", project_id) == 16

    assert client.delete(f"/v1/projects/{project}").status_code == 204
    assert _project_id(engine, tenant, project) is None  # gone for its tenant from the answer

    wait_for_the_deleter(app)  # and its rows after it
    assert _rows(engine, "saves", project_id) == 0
    assert _orphans(engine) == 0
    assert_problem(client.get(f"/v1/projects/{project}"), 404)
    assert_problem(client.get(f"/v1/projects/{project}/saves"), 404)
    assert [p["name"] for p in client.get("/v1/projects").json()["items"]] == [project + "-kept"]
    assert_problem(client.delete(f"/v1/projects/{project}"), 404)


def test_a_deleted_project_can_be_written_again_from_empty(client, project):
    import_save(client, project, seed_save())
    client.delete(f"/v1/projects/{project}")
    import_save(client, project, seed_save())
    counts = client.get(f"/v1/projects/{project}").json()["counts"]
    assert counts == dict.fromkeys(PROJECT_RESOURCES, 0) | {"saves": 1}
