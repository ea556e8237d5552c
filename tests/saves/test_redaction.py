"""The redaction's cheap literal checks never change what it finds: the gated redaction equals
every pattern applied to every text, on secrets of each kind, their case and Unicode
case-folding variants, secrets inside each other, and text with none."""

from collections import Counter

import pytest

from app import redaction

SAMPLES = [
    "nothing to see here, only prose about tokens and passes",
    # One secret a text, so that each of a pattern's literals is needed by one sample.
    "use key sk-proj-0123456789012345678901234567 now",
    "sk-ant-api03-01234567890123456789012",
    "sk_live_0123456789012345678901",
    "rk_test_0123456789012345678901",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_012345678901234567890123456789",
    "glpat-01234567890123456789",
    "xoxb-1234567890-abcdef",
    "AIza" + "0" * 35,
    "hf_012345678901234567890123456789",
    "gsk_abcdefghijklmnopqrstuvwxyz012345",
    "xai-0123456789012345678901234567890123",
    *(f"AWS {prefix}IOSFODNN7EXAMPLE" for prefix in ("AKIA", "ASIA", "AGPA", "AIDA")),
    *(f"AWS {prefix}IOSFODNN7EXAMPLE" for prefix in ("AROA", "ANPA", "ANVA", "AIPA")),
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN: 'FwoGZXIvYXdzEBYaDHVzZXJuYW1lMTIzNDU2Nzg5'",
    "DefaultEndpointsProtocol=https;AccountKey=abcdefghijklmnopqrstuvwxyz0123456789+/==",
    "Endpoint=sb://x/;SharedAccessKey=abcdefghijklmnopqrstuvwxyz0123456789=",
    "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1rwW1g",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K",
    "Authorization: BEARER Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN OPENSSH PRIVATE KEY-----\ncut short",
    "db password=hunter2",
    "PASSWD: 'x y'",
    "pwd=abc",
    'secret="s3cr3t"',
    "api_key=abc",
    "API-KEY: def",
    "Auth-Token=mno",
    "access_token=jkl",
    '{"password": "json quoted"}',
    "{'client_secret': 'python-quoted'}",
    '{\\"token\\": \\"escaped-json\\"}',
    "GITHUB_TOKEN: gt-123",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    '"authorization": "basic dXNlcjpwYXNz"',
    "postgres://admin:pw-123@db.internal:5432/app",
    "redis://:only-a-password@cache",
    "npm_" + "a" * 36,
    # Unicode case folding: the patterns' IGNORECASE matches these as ASCII letters.
    "PAſſWORD=hunter2",
    "ſecret=abc",
    "apİ_key=abc",
    "ap\u0131-key=def",
    "Shared\u212aey accountkey=\u212a",
    "AccountKey=abcdefghijklmnopqrstuvwxyz0123456789+/==".replace("K", "\u212a"),
    "bearer\u00a0abcdefghijklmnop",
]


def _ungated(text: str) -> tuple[str, Counter[str]]:
    counts: Counter[str] = Counter()
    for kind, pattern, replacement, _literals in redaction._REPLACEMENTS:
        text, found = pattern.subn(replacement, text)
        if found:
            counts[kind] += found
    return text, counts


@pytest.mark.parametrize("text", SAMPLES)
def test_the_gates_never_change_what_is_redacted(text):
    counts: Counter[str] = Counter()
    assert (redaction.redact_text(text, counts), counts) == _ungated(text)


def test_the_samples_exercise_every_kind():
    found: Counter[str] = Counter()
    for text in SAMPLES:
        found.update(_ungated(text)[1])
    assert set(found) == {kind for kind, _ in redaction._SECRET_PATTERNS}
