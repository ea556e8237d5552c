"""memory's full-text index keyed by project, on SQLite and PostgreSQL

SQLite's one FTS5 table held every tenant's items by their words alone, so a search read every
match of its words, in every project, before the outer query kept its own project's: its time
grew with other tenants' matches, which a tenant could time (a word 30,000 of another tenant's
decisions held: 6.3 ms, against 2.0 for a word none held, both answering nothing; 2026-11-27).

Each item is now indexed under a key that puts its project first, ``project_id * 2**32 + id``
(``PROJECT_RANGE`` in ``app/memory/repository.py``), so a project's items take one range of the
index's row ids, and a search
reads only its project's range of each word's list (FTS5 seeks to a range's start through the
list's own index: ``app/memory/repository.py``). A token for the project, matched with the
words, was tried first: FTS5 keeps one list a token whatever its column, so another tenant's
text holding the project's number was read all the same, and a project of many items still
stepped through another tenant's matches between its own. The key is no column of
``memory_items``, so the table is contentless (``content=''``): the triggers give it each
item's key and text, and take them back by the same values; it is filled here from the items
already stored. Its bounds (projects numbered below 2**31, items below 2**32) are checked by
the insert trigger, which refuses an item beyond them rather than index it under another
project's range. The downgrade makes the table before, filled by FTS5's ``rebuild``.

PostgreSQL's GIN index (0007) held every tenant's items under their words, and the planner,
whose statistics are of every tenant's items, chose a search's plan by them: for a word common
in other tenants' items it read the project's own items and filtered them, for a rare one the
word's list in the index. A tenant of 3,000 decisions searching a word 30,000 of another
tenant's held: 11.9-14.0 ms, a word nobody held: 4.5-4.7 ms, both answering nothing: it could
time whether other tenants' texts held a word (2026-11-27). The index is now over each item's
words under its project, ``p<project_id>x<word>`` (``memory_search_lexemes``), and a search
asks for its words under its own project (``memory_search_query``): each list the index reads
holds one project's items, and so do the statistics the planner weighs for the searched words.
A word the prefix would take beyond a lexeme's 2,047 bytes is held by its MD5, alike on both
sides, and an item's terms stop at a tsvector's 1 MB, which a text of 100,000 characters can
reach once prefixed (its later words are not found). Both functions are IMMUTABLE, as an
index's expression must be and as ``to_tsvector`` with its configuration named is. The index
keeps its name and 0017's ``fastupdate = off``; the downgrade makes 0007's again. Either way
the new index is built before the old one is dropped, so searches go on during the build.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27 16:30:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DROP = [
    "DROP TRIGGER IF EXISTS memory_items_fts_update",
    "DROP TRIGGER IF EXISTS memory_items_fts_delete",
    "DROP TRIGGER IF EXISTS memory_items_fts_insert",
    "DROP TABLE IF EXISTS memory_items_fts",
]


def _key(row: str) -> str:
    return f"({row}.project_id << 32) + {row}.id"


_FORGET = (
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    f"VALUES ('delete', {_key('old')}, old.search_text);"
)
_REMEMBER = (
    f"INSERT INTO memory_items_fts(rowid, search_text) VALUES ({_key('new')}, new.search_text);"
)
_IN_BOUNDS = (
    "SELECT RAISE(ABORT, 'memory_items_fts: project or item id beyond the search key') "
    "WHERE new.project_id NOT BETWEEN 0 AND 2147483647 OR new.id NOT BETWEEN 0 AND 4294967295;"
)
BY_PROJECT = [
    "CREATE VIRTUAL TABLE memory_items_fts USING fts5(search_text, content='')",
    "CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items "
    f"BEGIN {_IN_BOUNDS} {_REMEMBER} END",
    f"CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN {_FORGET} END",
    "CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF search_text, project_id "
    f"ON memory_items BEGIN {_FORGET} {_REMEMBER} END",
    "INSERT INTO memory_items_fts(rowid, search_text) "
    f"SELECT {_key('memory_items')}, search_text FROM memory_items",
]
# 0007's table: an item's words under its own id, its text read from memory_items.
BY_ITEM = [
    "CREATE VIRTUAL TABLE memory_items_fts USING fts5("
    "search_text, content='memory_items', content_rowid='id')",
    "CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); END",
    "CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF search_text ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(memory_items_fts, rowid, search_text) "
    "VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO memory_items_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "INSERT INTO memory_items_fts(memory_items_fts) VALUES ('rebuild')",
]


# PostgreSQL. A term is an item's word under its project, ``p<project_id>x<lexeme>``: the
# project's digits end at the first "x", so no two projects share a term. A lexeme holds at
# most 2,047 bytes: a word the prefix would take beyond them is held by its MD5, under "h".
_TERM = (
    "CASE WHEN octet_length(lexeme) + octet_length(prefix) > 2047 "
    "THEN 'p' || project_id::text || 'h' || md5(lexeme) ELSE prefix || lexeme END"
)
POSTGRES_FUNCTIONS_DROP = [
    "DROP FUNCTION IF EXISTS memory_search_query(bigint, text)",
    "DROP FUNCTION IF EXISTS memory_search_lexemes(bigint, text)",
]
# PL/pgSQL keeps its plans for the session; an SQL function with a query in it is planned
# again at each call, which cost an insert 30-40 µs more. Only pg_catalog's functions, which
# are found whatever the search path (maintenance and restores run an index's expression under
# their own), and pg_catalog's configuration named whole: a bare 'simple' is looked up on the
# caller's search path at each call, where a schema of the caller's could hold another (a
# review turned 'running cats' into 'run cat' so), and the index would hold other words than
# the searches ask for. E'' strings mean the same whatever standard_conforming_strings is.
POSTGRES_BY_PROJECT = [
    # A text of at most 500 bytes has no lexeme near 2,047 bytes (a character lowercased takes
    # at most 4 bytes for each of its own), nor a tsvector near its 1 MB: the common case, one
    # step a word. Beyond, an item's terms stop at that 1 MB (its later words are not found).
    rf"""CREATE FUNCTION memory_search_lexemes(project_id bigint, search_text text)
RETURNS tsvector LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    prefix text := 'p' || project_id::text || 'x';
    lexemes text[] := '{{}}';
    lexeme text;
    term text;
    room bigint := 1048575;
BEGIN
    IF octet_length(search_text) <= 500 THEN
        FOREACH lexeme IN ARRAY
                tsvector_to_array(to_tsvector('pg_catalog.simple'::regconfig, search_text)) LOOP
            lexemes := lexemes || (prefix || lexeme);
        END LOOP;
        RETURN array_to_tsvector(lexemes);
    END IF;
    FOREACH lexeme IN ARRAY
            tsvector_to_array(to_tsvector('pg_catalog.simple'::regconfig, search_text)) LOOP
        term := {_TERM};
        room := room - octet_length(term);
        EXIT WHEN room < 0;
        lexemes := lexemes || term;
    END LOOP;
    RETURN array_to_tsvector(lexemes);
END
$$""",
    # The words' lexemes as to_tsvector makes an item's, each a term quoted as a tsquery
    # lexeme (quotes and backslashes doubled), ANDed: never read as tsquery syntax. No
    # lexeme: an empty query, which matches nothing (as plainto_tsquery's did).
    rf"""CREATE FUNCTION memory_search_query(project_id bigint, words text)
RETURNS tsquery LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    prefix text := 'p' || project_id::text || 'x';
    terms text[] := '{{}}';
    lexeme text;
BEGIN
    FOREACH lexeme IN ARRAY
            tsvector_to_array(to_tsvector('pg_catalog.simple'::regconfig, words)) LOOP
        terms := terms || (
            '''' || replace(replace({_TERM}, E'\\', E'\\\\'), '''', '''''') || ''''
        );
    END LOOP;
    RETURN array_to_string(terms, ' & ')::tsquery;
END
$$""",
]


def _index_by(expression: str) -> list[str]:
    """The search index over ``expression``, in place of the one before: built under another
    name first, so that searches go on during the build (it blocks writes, as any index build
    does); the old one is dropped, which waits for the searches running, at the end."""
    return [
        "CREATE INDEX ix_memory_items_search_next ON memory_items "
        f"USING gin ({expression}) WITH (fastupdate = off)",
        "DROP INDEX ix_memory_items_search",
        "ALTER INDEX ix_memory_items_search_next RENAME TO ix_memory_items_search",
    ]


def _run(statements: list[str]) -> None:
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _run(DROP + BY_PROJECT)
        return
    _run(POSTGRES_BY_PROJECT + _index_by("memory_search_lexemes(project_id, search_text)"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _run(DROP + BY_ITEM)
        return
    # 0007's index, with 0017's option; then the functions, which nothing uses any more.
    _run(_index_by("to_tsvector('simple', search_text)") + POSTGRES_FUNCTIONS_DROP)
