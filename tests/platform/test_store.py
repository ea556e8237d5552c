"""``ProjectScopedRepository``: a change to a stored row that finds no row to change is an
error, never a change silently lost (the ORM's flush, which it replaced, raised the same); a
locking look-up with a value read along, on a table that reads none, says so."""

import pytest
from sqlalchemy import delete
from sqlalchemy.orm.exc import StaleDataError

from app.features.models import FeatureContext
from app.features.repository import FeatureRepository
from app.formats import feature_context
from app.projects.service import project_id
from app.saves.repository import SaveRepository


def test_a_store_into_a_row_that_is_gone_raises_and_changes_nothing(app, client, tenant, project):
    url = f"/v1/projects/{project}/features/f"
    document = feature_context.template("f", "2026-01-01T00:00:00+00:00")
    content = feature_context.render(document)
    stored = client.put(
        f"{url}/context", content=content, headers={"Content-Type": "application/json"}
    )
    assert stored.status_code == 201, stored.text
    with app.state.database.write_session() as session:
        repository = FeatureRepository(session)
        row = repository.get(project_id(session, tenant, project), "f", for_update=True)
        assert row is not None
        session.execute(delete(FeatureContext).where(FeatureContext.id == row.id))  # type: ignore[arg-type]
        with pytest.raises(StaleDataError):
            repository.store(row, {"size_bytes": 1})
        # The row's stored values are not the change's.
        assert row.size_bytes != 1
        session.rollback()
    assert client.get(f"{url}/context").content == content


def test_a_look_up_with_a_value_read_along_on_a_table_that_reads_none_says_so(app):
    with (
        app.state.database.write_session() as session,
        pytest.raises(TypeError, match="SaveRepository reads nothing along its rows"),
    ):
        SaveRepository(session).locked_with(1, 1)
