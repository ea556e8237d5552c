"""Property tests: a secret of each kind the redactor claims, inside random conversation text,
never survives into storage, the logs or an export.

The text around a secret is arbitrary Unicode (spaces, punctuation, accented and CJK letters
glued to it, emoji, newlines) except ASCII letters and digits, so that a secret is always a
token of its own (``xAKIA...`` is another word) and can never appear in the surrounding text
by chance. What must not survive is each secret's sensitive part: the whole token, or the value
of a ``password=`` style assignment, or the body of a private key.
"""

import contextlib
import gzip
import json
import logging
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text

from app.core.db import metadata
from app.redaction import Redactions, redact_document
from tests.helpers import SOAK, import_save, seed_save


def redact_save(document: dict[str, Any]) -> dict[str, int]:
    redactions = Redactions()
    redact_document(document, redactions)
    return redactions.by_kind()


ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "_-"


def _chars(alphabet: str, low: int, high: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=low, max_size=high or low)


# (what is written, what must not survive)
Secret = tuple[str, list[str]]


def _token(prefix: str, alphabet: str, low: int, high: int) -> st.SearchStrategy[Secret]:
    return _chars(alphabet, low, high).map(lambda body: (prefix + body, [prefix + body]))


API_KEYS = st.one_of(
    _token("sk-ant-api03-", B64URL, 20, 60),
    _token("sk-proj-", B64URL, 20, 60),
    _token("sk-", ALNUM, 20, 48),
    _token("ghp_", ALNUM, 36, 40),
    _token("github_pat_", ALNUM + "_", 30, 60),
    _token("glpat-", B64URL, 20, 30),
    _token("xoxb-", ALNUM + "-", 10, 50),
    _token("AIza", B64URL, 35, 35),
    _token("sk_live_", ALNUM, 24, 40),
    _token("rk_test_", ALNUM, 24, 40),
    _token("hf_", ALNUM, 34, 40),
    _token("gsk_", ALNUM, 40, 52),
    _token("xai-", ALNUM, 40, 80),
)

CLOUD_KEYS = st.one_of(
    st.builds(
        lambda prefix, body: (prefix + body, [prefix + body]),
        st.sampled_from(["AKIA", "ASIA", "AROA", "AIDA"]),
        _chars(string.ascii_uppercase + string.digits, 16),
    ),
    st.builds(
        lambda name, sep, value: (name + sep + value, [value]),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "aws_session_token"]),
        st.sampled_from(["=", " = ", ": ", ":"]),
        _chars(B64, 40),
    ),
    st.builds(
        lambda name, value: (f"{name}={value}", [value]),
        st.sampled_from(["AccountKey", "SharedAccessKey"]),
        _chars(B64, 44, 88),
    ),
)

BEARER_TOKENS = st.builds(
    lambda scheme, token: (f"{scheme} {token}", [token]),
    st.sampled_from(["Bearer", "bearer", "BEARER", "Authorization: Bearer"]),
    _chars(ALNUM + "._~+/-", 16, 64),
)

JWTS = st.builds(
    lambda header, payload, signature: (f"eyJ{header}.eyJ{payload}.{signature}",) * 2,
    _chars(B64URL, 8, 40),
    _chars(B64URL, 8, 120),
    _chars(B64URL, 16, 86),
).map(lambda pair: (pair[0], [pair[1]]))

PRIVATE_KEYS = st.builds(
    lambda label, lines: (
        f"-----BEGIN {label}PRIVATE KEY-----\n"
        + "\n".join(lines)
        + f"\n-----END {label}PRIVATE KEY-----",
        lines,
    ),
    st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
    st.lists(_chars(B64, 16, 64), min_size=1, max_size=6),
)

# A value stops at whitespace, a comma, a semicolon, a quote or a closing bracket, where an
# unquoted assignment in prose or code ends; quoted, it runs to the closing quote.
PASSWORD_VALUE = _chars(ALNUM + "!@#$%^&*()-_+=/.<>?|~", 8, 32).filter(
    lambda value: any(char in ALNUM for char in value)  # punctuation alone: the text has it too
)
PASSWORDS = st.builds(
    lambda name, sep, value, quote: (f"{name}{sep}{quote}{value}{quote}", [value]),
    st.sampled_from(
        ["password", "PASSWORD", "passwd", "pwd", "pass", "secret", "client_secret", "api_key"]
        + ["api-key", "apikey", "access_token", "auth_token", "Password"]
        + ["PGPASSWORD", "MYSQL_PWD", "dbPassword", "db_password", "smtpPassword", "userPwd"]
        + ["password_confirmation", "passwordConfirmation", "password2", "MYSQLPASSWORD"]
    ),
    st.sampled_from(["=", ": ", " = ", ":", " := ", "=>", " => "]),
    PASSWORD_VALUE,
    st.sampled_from(["", '"', "'"]),
)
# A command line's long option, its value after a space (one that begins with "-" is the next
# option), the option after a space as on a command line.
PASSWORD_OPTIONS = st.builds(
    lambda name, value, quote: (f" --{name} {quote}{value}{quote}", [value]),
    st.sampled_from(["password", "PASSWORD", "db-password", "passwd", "mysql_password"]),
    PASSWORD_VALUE.filter(lambda value: not value.startswith("-")),
    st.sampled_from(["", '"', "'"]),
)

SECRETS = {
    "api_key": API_KEYS,
    "cloud_access_key": CLOUD_KEYS,
    "bearer_token": BEARER_TOKENS,
    "jwt": JWTS,
    "private_key": PRIVATE_KEYS,
    "password": st.one_of(PASSWORDS, PASSWORD_OPTIONS),
}

# Any text that holds no ASCII letter or digit: it can neither join a secret nor contain one.
SURROUNDING = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters=ALNUM),
    max_size=40,
)


def _place(document: dict[str, Any], where: str, content: str) -> None:
    context = document["context"]
    if where == "message":
        context["conversation_history"][1]["content"] = content
    elif where == "artifact":
        context["artifacts"]["plan"]["content"] = content
    elif where == "decision":
        context["decisions"][0]["rationale"] = content
    elif where == "debate":
        document["debates"][0]["arguments"]["dev"] = content
    else:
        document["errors"] = [{"id": "e1", "message": content}]


PLACES = st.sampled_from(["message", "artifact", "decision", "debate", "error"])


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys too, as text (never JSON-escaped)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings_in(item)


def _readable(value: Any) -> Iterator[str]:
    if isinstance(value, bytes | memoryview):
        raw = bytes(value)
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        decoded = raw.decode("utf-8", "replace")
        yield decoded
        with contextlib.suppress(ValueError):  # not every column holds JSON
            yield from strings_in(json.loads(raw))
    elif value is not None:
        yield str(value)


def stored_strings(engine, tenant: str, project: str) -> list[str]:
    """Every value the database holds for this tenant's project, decoded where it is a
    (possibly compressed) document."""
    found: list[str] = []
    with engine.connect() as connection:
        project_id = connection.execute(
            text("SELECT id FROM projects WHERE tenant = :tenant AND name = :name"),
            {"tenant": tenant, "name": project},
        ).scalar_one()
        for table in metadata.sorted_tables:
            if "project_id" in table.c:
                query = select(table).where(table.c.project_id == project_id)
            elif "tenant" in table.c:
                query = select(table).where(table.c.tenant == tenant)
            else:
                query = select(table)
            for row in connection.execute(query):
                for value in row:
                    found.extend(_readable(value))
    return found


def _survivors(secret_parts: list[str], haystacks: list[str]) -> list[str]:
    return [part for part in secret_parts if any(part in haystack for haystack in haystacks)]


MARKERS = [f"[REDACTED:{kind}]" for kind in SECRETS]
# What is there without any secret: a generated value that happens to be a word of the save
# ("complete") would be found whether or not it was redacted.
SEED_STRINGS = [*strings_in(seed_save()), *MARKERS]


@pytest.mark.parametrize(
    ("text", "kind", "secret"),
    [
        ("密钥是sk-ant-api03-" + "a1" * 12 + "。", "api_key", "a1" * 12),
        ("cléAKIAIOSFODNN7EXAMPLE", "cloud_access_key", "AKIAIOSFODNN7EXAMPLE"),
        ("ıbearer abcdefghijklmnop", "bearer_token", "abcdefghijklmnop"),
        ("\u212apassword=hunter2-horse", "password", "hunter2-horse"),  # the Kelvin sign
        ("トークンeyJhbGciOiJI.eyJzdWIiOiIx.c2lnbmF0dXJl", "jwt", "c2lnbmF0dXJl"),
    ],
)
def test_secrets_glued_to_non_ascii_letters_are_redacted(text, kind, secret):
    """Found by the property below: ``\\b`` saw no word boundary after "是", "é" or "ト", and
    case-insensitive patterns took "ı" and the Kelvin sign for ASCII letters."""
    document = seed_save()
    _place(document, "message", text)
    assert redact_save(document) == {kind: 1}
    assert secret not in document["context"]["conversation_history"][1]["content"]


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_the_redactor_leaves_no_secret_in_any_text(kind):
    @settings(max_examples=300 * SOAK)
    @given(SECRETS[kind], SURROUNDING, SURROUNDING, PLACES)
    def check(secret: Secret, before: str, after: str, where: str) -> None:
        written, sensitive = secret
        assume(not _survivors(sensitive, SEED_STRINGS))
        document = seed_save()
        _place(document, where, before + written + after)
        counts = redact_save(document)
        assert counts.get(kind, 0) >= 1, (written, counts)
        assert not _survivors(sensitive, list(strings_in(document)))

    check()


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_no_secret_reaches_storage_logs_or_exports(client, engine, tenant, project, kind, caplog):
    caplog.set_level(logging.DEBUG)
    plain = import_save(client, project, seed_save())
    exported = client.get(f"/v1/projects/{project}/saves/{plain.json()['id']}")
    baseline = [plain.text, exported.text, caplog.text, *stored_strings(engine, tenant, project)]
    baseline += SEED_STRINGS

    @settings(max_examples=12 * SOAK, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(SECRETS[kind], SURROUNDING, SURROUNDING, PLACES)
    def check(secret: Secret, before: str, after: str, where: str) -> None:
        written, sensitive = secret
        assume(not _survivors(sensitive, baseline))
        document = seed_save()
        _place(document, where, before + written + after)
        first_record = len(caplog.records)
        receipt = import_save(client, project, document)
        assert receipt.status_code == 201, receipt.text
        assert receipt.json()["redactions"].get(kind, 0) >= 1
        exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}")
        logs = [record.getMessage() for record in caplog.records[first_record:]]
        stored = stored_strings(engine, tenant, project)
        marker = f"[REDACTED:{kind}]"
        assert any(marker in value for value in stored), "the scan did not reach the save"
        for where_found, haystacks in (
            ("receipt", [receipt.text]),
            ("export", [exported.text, *strings_in(json.loads(exported.content))]),
            ("database", stored),
            ("logs", logs),
        ):
            assert not _survivors(sensitive, haystacks), f"{kind} survives in the {where_found}"

    check()


# What a receipt may quote: a secret of any kind in text around it, as a value or as a key, or
# a key that names a secret; text of any Unicode, quotes and escapes included.
QUOTED = st.one_of(*SECRETS.values()).flatmap(
    lambda secret: st.tuples(SURROUNDING, SURROUNDING).map(
        lambda around: around[0] + secret[0] + around[1]
    )
)
# Secrets whose own whitespace JSON escapes (a tab, a newline, a form feed, a carriage return):
# in a receipt's bytes their head is not as in the text.
ESCAPED = st.builds(
    lambda head, space, tail: head.format(space=space) + tail,
    st.sampled_from(
        [
            "Bearer{space}",
            "password{space}= ",
            "token{space}:",
            "Authorization:{space}Basic ",
            "aws_secret_access_key{space}=",
            '{{"password"{space}: "',
        ]
    ),
    st.sampled_from(["\t", "\n", "\f", "\r", "\x0b"]),
    _chars(B64, 20, 30),
)
ANSWER_TEXT = st.one_of(QUOTED, ESCAPED, st.text(max_size=40), st.just('"quoted" \\ back'))
ANSWER_KEYS = st.one_of(
    st.text(max_size=20),
    QUOTED,
    st.sampled_from(["password", "db_password", "GITHUB_TOKEN", "X-Api-Key", "client.secret"]),
)
ANSWERS = st.fixed_dictionaries(
    {
        "text": ANSWER_TEXT,
        "number": st.integers(),
        "listed": st.lists(ANSWER_TEXT, max_size=4),
        "keyed": st.dictionaries(ANSWER_KEYS, st.one_of(ANSWER_TEXT, st.none()), max_size=4),
    }
)


@settings(max_examples=300 * SOAK, deadline=None)
@given(document=ANSWERS)
def test_a_write_answer_is_redacted_as_its_document_would_be(document):
    """``answer_without_secrets`` walks a receipt only when a scan of its bytes finds a head
    or an escape other than a quote's: what it answers is what the walk alone would."""
    from app.core.json import FastJSONResponse, dumps
    from app.core.redaction import RequestRedactions, answer_without_secrets

    with RequestRedactions(enabled=True):
        answered = bytes(answer_without_secrets(FastJSONResponse(document)).body)
    walked = redact_document(json.loads(dumps(document)), Redactions())
    assert json.loads(answered) == walked
