"""The file a SQLite URL names (``app/core/config.py`` ``sqlite_file``): the one the service
makes a directory for, keeps a fingerprint key beside and checkpoints
(``tests/platform/test_checkpoints.py`` runs an app on a ``file:`` URI). It is the name the
driver is given, read as SQLite reads it (its "URI Filenames" rules)."""

import os

import pytest

from app.core.config import Settings, sqlite_file


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///data/x.db", os.path.abspath("data/x.db")),
        ("sqlite:////srv/x.db", "/srv/x.db"),
        ("sqlite:///file:data/x.db?mode=rwc&uri=true", "data/x.db"),
        ("sqlite:///file:///srv/x.db?uri=true", "/srv/x.db"),
        ("sqlite:///file://localhost/srv/x.db?uri=1", "/srv/x.db"),
        # The URL's escapes are undone by SQLAlchemy, the URI's by SQLite: bytes, up to a NUL.
        ("sqlite:///file:data/two%2520words.db?uri=true", "data/two words.db"),
        ("sqlite:///file:data/a%2509b.db?uri=true", "data/a\tb.db"),
        ("sqlite:///file:data/y.db%2500z?uri=true", "data/y.db"),
        ("sqlite:///file:data/%25FF.db?uri=true", os.fsdecode(b"data/\xff.db")),
        # Without uri=true SQLite opens the name as it is: a file called "file:data/x.db".
        ("sqlite:///file:data/x.db", os.path.abspath("file:data/x.db")),
        ("sqlite:///file:data/x.db?uri=false", os.path.abspath("file:data/x.db")),
        # With it, a name not starting with "file:" is a plain name, the URL's parameters too.
        ("sqlite:///data/x.db?uri=true&mode=rwc", "data/x.db?mode=rwc"),
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
        "sqlite:///file:data/x.db?vfs=memdb&uri=true",
        # SQLAlchemy undoes the escape: SQLite is given "file:data/x.db?mode=memory".
        "sqlite:///file:data/x.db%3Fmode=memory?uri=true",
        "postgresql+psycopg://postgres@127.0.0.1:5432/context_store",
    ],
)
def test_a_database_in_memory_or_elsewhere_has_no_file(url):
    assert sqlite_file(url) is None
    assert Settings(database_url=url).fingerprint_key_file is None
