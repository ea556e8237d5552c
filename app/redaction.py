"""Secrets out of every document before it is stored, echoed or replayed (seed 000, "Security").

Pure code, used by every domain: each secret is replaced by ``[REDACTED:<kind>]`` where it
stands, in every string value and every object key of a document (``redact_document``), and
where it was found is recorded as a JSON Pointer and a kind (``Redactions``). Two detectors:

- patterns over text (``redact_text``), most specific first, so that a JWT inside a bearer
  header counts once, as a JWT;
- names: a member whose key names a secret (``password``, ``client_secret``, ``GITHUB_TOKEN``,
  ``Authorization``...) has its whole string value replaced, whatever the value looks like.
"""

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

MARKER = "[REDACTED:{kind}]"
MARKER_START = "[REDACTED:"

# Where a token starts and ends: not next to an ASCII letter or digit. Not ``\b``, which is
# Unicode-aware: a key glued to "é" or "密钥" (text without spaces) would escape it. Patterns
# scope IGNORECASE to their words, which would otherwise let "ı" or "K" (Kelvin) count as ASCII.
_START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"

# Names whose value is a secret, in text (``password=...``, ``"token": "..."``) and as keys.
_SECRET_NAME = (
    r"(?i:password|passwd|passphrase|pwd|pass|secret|client[_-]?secret|secret[_-]?key"
    r"|api[_-]?key|apikey|access[_-]?key|private[_-]?key|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|session[_-]?token|id[_-]?token|token|credentials?|authorization)"
)
# A key that names a secret: the name alone or at the end of a prefixed name (``db_password``,
# ``X-Api-Key``, ``OPENAI_API_KEY``), never as a prefix (``token_usage`` is a count).
_SECRET_KEY = re.compile(r"(?:[A-Za-z0-9]+[_.-])*" + _SECRET_NAME)

# A value after ``name = `` or ``"name": ``: JSON- or Python-quoted (a backslash before the quote
# when the text is itself JSON inside a string), or bare up to where an assignment in prose or
# code ends. Never a marker: a redacted value stays redacted once.
_ASSIGNED_VALUE = (
    r"(?!\\?[\"']?\[REDACTED:)"
    r"(?:\\?\"([^\"\\\n]+)|'([^'\n]+)|([^\s,;\"'}\]\\]+))"
)

_SECRET_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("jwt", re.compile(_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    (
        "api_key",
        re.compile(
            _START + r"(?:"
            r"sk-ant-[A-Za-z0-9_-]{20,}"  # Anthropic
            r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
            r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
            r"|AIza[0-9A-Za-z_-]{35}"  # Google
            r"|(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,}"  # Stripe
            r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
            r"|gsk_[A-Za-z0-9]{30,}"  # Groq
            r"|xai-[A-Za-z0-9]{30,}"  # xAI
            r"|npm_[A-Za-z0-9]{36}"  # npm
            r"|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"  # SendGrid
            r")"
        ),
    ),
    (
        "cloud_access_key",
        re.compile(
            _START
            + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"
            + _END  # AWS key ids
            + r"|(?i:aws_secret_access_key|aws_session_token)\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{16,}"
            r"|(?i:AccountKey|SharedAccessKey)=[A-Za-z0-9+/=]{20,}"  # Azure
        ),
    ),
    ("bearer_token", re.compile(_START + r"(?i:bearer)\s+[A-Za-z0-9._~+/-]{12,}=*")),
    (
        # An HTTP Basic header (the word "basic" alone is prose): ``Authorization: Basic b64``,
        # JSON- or Python-quoted too; the scheme and its credentials become the marker.
        "basic_auth",
        re.compile(
            _START + r"(?i:authorization)\\?[\"']?\s*[:=]\s*\\?[\"']?"
            r"((?i:basic)\s+[A-Za-z0-9+/]{4,}=*)"
        ),
    ),
    (
        # The password of a URL's userinfo: ``postgres://user:pw@host``; user and host stay.
        "url_credential",
        re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@\"'<>]*:(?!\[REDACTED:)([^\s/@\"'<>]+)@"),
    ),
    (
        "password",
        re.compile(
            _START + _SECRET_NAME + r"(?![A-Za-z0-9_-])\\?[\"']?\s*[:=]\s*" + _ASSIGNED_VALUE
        ),
    ),
]


# The literal text every match of a kind's pattern holds, case-folded. A pattern runs only on
# text that holds one of its literals: a few substring searches cost far less than the
# patterns (which, with their case-insensitive alternations, try every position), and never
# change the result, since no match can lack them. Case-folding covers what IGNORECASE
# matches (the long s and the Kelvin sign), dotless and dotted capital i apart (see _fold).
_LITERALS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----begin",),
    "jwt": ("eyj",),
    "api_key": (
        *("sk-", "sk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "aiza", "hf_", "xai-"),
        *("npm_", "sg."),
    ),
    "cloud_access_key": (
        *("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
        *("aws_s", "accountkey", "accesskey"),
    ),
    "bearer_token": ("bearer",),
    "basic_auth": ("basic",),
    "url_credential": ("://",),
    "password": ("pass", "pwd", "secret", "api", "token", "key", "credential", "authorization"),
}


def _fold(text: str) -> str:
    # IGNORECASE also matches "i" to U+0131, which casefold() leaves as it is.
    return text.casefold().replace("\u0131", "i")


def _replacement(kind: str, pattern: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    marker = MARKER.format(kind=kind)
    if not pattern.groups:
        return lambda _match: marker

    def value_only(match: re.Match[str]) -> str:
        # Keep the name, the separator and the quotes: only the value is the secret.
        group = match.lastindex
        assert group is not None
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        whole = match.group()
        return whole[:start] + marker + whole[end:]

    return value_only


_REPLACEMENTS = [
    (kind, pattern, _replacement(kind, pattern), _LITERALS[kind])
    for kind, pattern in _SECRET_PATTERNS
]


def redact_text(text: str, counts: Counter[str]) -> str:
    """``text`` with every secret the patterns find replaced, counting them by kind."""
    folded = _fold(text)
    for kind, pattern, replacement, literals in _REPLACEMENTS:
        # map() with the bound method: no Python frame per literal (a generator's cost more
        # than the searches themselves on a large save).
        if not any(map(folded.__contains__, literals)):
            continue
        text, found = pattern.subn(replacement, text)
        if found:
            counts[kind] += found
            folded = _fold(text)
    return text


def names_a_secret(key: str) -> bool:
    return _SECRET_KEY.fullmatch(key) is not None


class Redactions:
    """What was redacted in one document: how many of each kind, at which JSON Pointer."""

    def __init__(self) -> None:
        self.sites: Counter[tuple[str, str]] = Counter()

    def add(self, pointer: str, counts: Counter[str]) -> None:
        for kind, count in counts.items():
            self.sites[pointer, kind] += count

    def __bool__(self) -> bool:
        return bool(self.sites)

    def by_kind(self) -> dict[str, int]:
        totals: Counter[str] = Counter()
        for (_pointer, kind), count in self.sites.items():
            totals[kind] += count
        return dict(sorted(totals.items()))

    def listing(self) -> list[dict[str, str | int]]:
        """``[{path, kind, count}]`` in the document's order of discovery."""
        return [
            {"path": pointer, "kind": kind, "count": count}
            for (pointer, kind), count in self.sites.items()
        ]


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


class _Walker:
    """One document's walk. Keys repeat (every message has ``role`` and ``content``): a key
    found clean once is not checked again."""

    def __init__(self, redactions: Redactions) -> None:
        self.redactions = redactions
        self.clean_keys: set[str] = set()
        self.path: list[str] = []

    def pointer(self) -> str:
        return "".join("/" + _escape(part) for part in self.path)

    def text(self, value: str) -> str:
        counts: Counter[str] = Counter()
        redacted = redact_text(value, counts)
        if counts:
            self.redactions.add(self.pointer(), counts)
        return redacted

    def named_value(self, value: str) -> str:
        """The whole value of a member named as a secret."""
        if not value or value.startswith(MARKER_START):
            return value
        self.redactions.add(self.pointer(), Counter(password=1))
        return MARKER.format(kind="password")

    def key(self, key: str, taken: dict[str, Any]) -> str:
        if key in self.clean_keys:
            return key
        redacted = self.text(key)
        if redacted == key:
            self.clean_keys.add(key)
            return key
        # Two keys that redact alike must both be kept: the later one gets a number.
        unique, number = redacted, 2
        while unique in taken:
            unique, number = f"{redacted}#{number}", number + 1
        return unique

    def walk(self, value: Any) -> Any:
        if type(value) is str:
            return self.text(value)
        if type(value) is list:
            for index, item in enumerate(value):
                if type(item) in (str, list, dict):
                    self.path.append(str(index))
                    value[index] = self.walk(item)
                    self.path.pop()
        elif type(value) is dict:
            self.members(value)
        return value

    def members(self, node: dict[str, Any]) -> None:
        renamed: dict[str, Any] | None = None
        for key, item in node.items():
            new_key = self.key(key, renamed if renamed is not None else node)
            self.path.append(new_key)
            if type(item) is str and names_a_secret(key):
                item = self.named_value(item)
            elif type(item) in (str, list, dict):
                item = self.walk(item)
            self.path.pop()
            if new_key != key and renamed is None:
                renamed = {}
                for earlier, earlier_item in node.items():
                    if earlier == key:
                        break
                    renamed[earlier] = earlier_item
            if renamed is not None:
                renamed[new_key] = item
            else:
                node[key] = item
        if renamed is not None:
            # In place: the parent holds this very object.
            node.clear()
            node.update(renamed)


def redact_document(document: Any, redactions: Redactions) -> Any:
    """Every string value and object key of a JSON document redacted, in place (a new value
    only for a document that is itself a string); records each site in ``redactions``."""
    return _Walker(redactions).walk(document)


def redact_value(value: Any) -> Any:
    """``redact_document`` for text that is not a document (a message, a problem): the sites
    are not wanted."""
    return redact_document(value, Redactions())


def redact_pointer(pointer: str) -> str:
    """A JSON Pointer with any secret in its keys redacted: each key is redacted unescaped,
    as it stands in the document (escaped, ``://`` reads ``:~1~1``)."""
    if not pointer.startswith("/"):
        redacted: str = redact_value(pointer)
        return redacted
    parts = (part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/"))
    return "".join("/" + _escape(redact_value(part)) for part in parts)
