"""The file a SQLite URL names (``app/core/config.py`` ``sqlite_file``): the one the service
makes a directory for, keeps a fingerprint key beside and checkpoints
(``tests/platform/test_checkpoints.py`` runs an app on a ``file:`` URI)."""

import pytest

from app.core.config import Settings, sqlite_file


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///data/x.db", "data/x.db"),
        ("sqlite:////srv/x.db", "/srv/x.db"),
        ("sqlite:///file:data/x.db?mode=rwc&uri=true", "data/x.db"),
        ("sqlite:///file:///srv/x.db?uri=true", "/srv/x.db"),
        ("sqlite:///file://localhost/srv/x.db?uri=1", "/srv/x.db"),
        ("sqlite:///file:data/two%2520words.db?uri=true", "data/two words.db"),
        # Without uri=true SQLite opens the name as it is: a file called "file:data/x.db".
        ("sqlite:///file:data/x.db", "file:data/x.db"),
        ("sqlite:///file:data/x.db?uri=false", "file:data/x.db"),
    ],
)
def test_the_file_a_sqlite_url_names(url, path):
    assert sqlite_file(url) == path
    assert Settings(database_url=url).fingerprint_key_file == f"{path}.fingerprint-key"


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///file::memory:?uri=true",
        "sqlite:///file:shared?mode=memory&cache=shared&uri=true",
        "postgresql+psycopg://postgres@127.0.0.1:5432/context_store",
    ],
)
def test_a_database_in_memory_or_elsewhere_has_no_file(url):
    assert sqlite_file(url) is None
    assert Settings(database_url=url).fingerprint_key_file is None
