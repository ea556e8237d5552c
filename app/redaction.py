"""Secrets out of every document before it is stored, echoed or replayed (seed 000, "Security").

Pure code, used by every domain: each secret is replaced by ``[REDACTED:<kind>]`` where it
stands, in every string value and every object key of a document (``redact_document``), and
where it was found is recorded as a JSON Pointer and a kind (``Redactions``). Two detectors:

- patterns over text, most specific first, so that a JWT inside a bearer
  header counts once, as a JWT;
- names: a member whose key names a secret (``password``, ``dbPassword``, ``client_secret``,
  ``GITHUB_TOKEN``, ``Authorization``...) has its whole string value replaced, whatever the
  value looks like, and so has each string of a list it holds.

The patterns are Python's ``re``, which tries every position of every text: on a large save
that cost 25 times parsing it. So a gate runs first: the start of every pattern (its
"head", which every match begins with) compiled into one Hyperscan database and run in C over
all of a document's strings at once; only a string where some head matches is given to the
patterns, and only to those of the kinds found. Nothing else can match, so the gate never
changes what is redacted (``tests/saves/test_redaction.py`` holds it to that).
"""

import re
import threading
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import hyperscan

MARKER = "[REDACTED:{kind}]"
MARKER_START = "[REDACTED:"

# Where a token starts and ends: not next to an ASCII letter or digit. Not ``\b``, which is
# Unicode-aware: a key glued to "é" or "密钥" (text without spaces) would escape it. Patterns
# scope IGNORECASE to their words, which would otherwise let "ı" or "K" (Kelvin) count as ASCII.
_START = r"(?<![A-Za-z0-9])"
_END = r"(?![A-Za-z0-9])"

# Names whose value is a secret, in text (``password=...``, ``"token": "..."``) and as keys.
_SECRET_NAMES = (
    r"password|passwd|passphrase|pwd|pass|secret|client[_-]?secret|secret[_-]?key"
    r"|api[_-]?key|apikey|access[_-]?key|private[_-]?key|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|session[_-]?token|id[_-]?token|token|credentials?|authorization"
)
_SECRET_NAME = f"(?i:{_SECRET_NAMES})"
# The words that name a password (not ``pass``, which ends ``bypass``, nor ``secret``).
_PASSWORD_WORDS = r"password|passwd|passphrase"
_PASSWORD_WORD = f"(?i:{_PASSWORD_WORDS})"
# Glued to a password word, a name counts only when it says whose password it is
# (``dbPassword``, ``smtppassword``, ``PGPASSWORD``, ``newPassword``): a verb or a question
# glued to it names a field, a toggle or a function (``showPassword``, ``forgotPassword``,
# ``resetPassword``, ``isPassword``), and their values are labels, URLs, booleans (a false
# positive destroys what a user stored). Any all-capitals name glued to ``PASSWORD`` or
# ``PASSWD`` is an environment variable's (``MYSQLPASSWORD``). ``Pwd`` is a password only
# camel-case after the same names, but for ``old`` and ``current``: ``oldPwd``, like the
# shell's ``OLDPWD``, is a directory. The owner starts the name or follows a separator:
# ``mainDbPassword`` is missed rather than ``showUserPassword: true`` destroyed.
_OWNERS = (
    r"db|database|smtp|e?mail|mysql|pg|postgres|redis|mongo|ldap|admin|root|user|app|api"
    r"|s?ftp|ssh|proxy|vnc|wifi|keystore|truststore|master|service|bind|sa|gpg"
)
_OWNER_WORDS = f"{_OWNERS}|new|old|current|confirm"
# After the word, which password it is (``password_confirmation``, ``passwordConfirmation``,
# ``password2``, ``password-repeat``); not ``password_policy``, ``passwordless``,
# ``password_hint``, ``passwordLength``, ``password_reset_at``, ``password_hash`` (a hash is not
# the password), ``passwords``.
_WHICH_PASSWORDS = r"[_-]?(?:confirmation|confirm|repeat|again|new|old)|[_-]?[12]"
_PASSWORD_NAME = (
    f"(?:(?i:{_OWNER_WORDS})?{_PASSWORD_WORD}|[A-Z][A-Z0-9]*?PASS(?:WORD|WD)"
    f"|(?i:{_OWNERS}|new|confirm)Pwd)(?i:{_WHICH_PASSWORDS})?"
)
# A key that names a secret: the name alone or at the end of a prefixed name (``db_password``,
# ``X-Api-Key``, ``OPENAI_API_KEY``), or a password's name as above; never as a prefix:
# ``token_usage`` is a count, and ``forgot_password_url`` a link.
_SECRET_KEY = re.compile(r"(?:[A-Za-z0-9]+[_.-])*(?:" + _PASSWORD_NAME + "|" + _SECRET_NAME + ")")

# A value after ``name = `` or ``"name": ``: JSON- or Python-quoted (a backslash before the quote
# when the text is itself JSON inside a string), or bare up to where an assignment in prose or
# code ends. Never a marker: a redacted value stays redacted once. Nor a bare value of nothing
# but operators' characters (``=``, ``:``, ``>``, ``|``), nor YAML's block indicator (``|``,
# ``>-``: the value is on the lines below): the ``=`` of ``:=`` and the ``>`` of ``=>`` were
# taken for the value, reported redacted while the value stayed. Such characters before others
# are the value's (``password==x9``). Nor a bare value that begins with ``[`` or ``{`` (a list,
# an object, a template's ``{{``): only the bracket was replaced, and reported, the secrets in
# it kept; they are missed, not falsely reported. Nor a bare literal or type (``true``,
# ``null``, ``string``: ``newPassword: string;`` declares a field, ``password: true`` a flag).
_NOT_A_VALUE = (
    r"(?:true|false|True|False|TRUE|FALSE|null|NULL|None|nil|undefined"
    r"|string|number|boolean|bool|str|int)(?![^\s,;\"'}\]\\\[|)?])"
)
_ASSIGNED_VALUE = (
    r"(?!\\?[\"']?\[REDACTED:)"
    r"(?![|>][-+0-9]{0,2}(?![^\s,;\"'}\]\\]))"
    r"(?:\\?\"([^\"\\\n]+)|'([^'\n]+)|(?!"
    + _NOT_A_VALUE
    + r")([:=>|]*+[^\s,;\"'}\]\\:=>|\[{][^\s,;\"'}\]\\]*))"
)

# A secret's name in text, before its operator, at a token's start (so that a start inside a
# run of letters is refused at once): a password's name (above), or any other secret's. Every
# name begins with a letter (or one that IGNORECASE takes for an ASCII letter): the look ahead
# refuses every other start before the names are tried, which cost a MiB of spaces or "="
# after ``password:`` three times as much (1.2-1.5 s against 0.4-0.6 under the hang guard).
# And a password's name is tried only where the run of letters holds "pas" or "pw" (read from
# the run's start alone, so once): its owners, tried at every word of prose, cost a MiB of it
# 210 ms against 80 before.
_LETTERS = "A-Za-z0-9\u0130\u0131\u017f\u212a"
_NAME_IN_TEXT = (
    f"{_START}(?=[{_LETTERS}])(?:(?=[{_LETTERS}]*?(?i:pas|pw)){_PASSWORD_NAME}|{_SECRET_NAME})"
)
# ``=``, ``:``, Go's ``:=``, PHP's, Perl's and Ruby's ``=>``; not ``==``, a comparison
# (``password == confirm_password``), nor ``->``, an arrow in prose (``email -> password -> MFA``).
_OPERATOR = r"(?::=|=>|[:=])"
# A command line's long option and its value after a space (``--password hunter2``,
# ``--db-password 'x y'``; ``--password=x`` is an assignment). Not a value that begins with "-":
# it is the next option (``mysql --password -h db`` asks for the password). Not ``-p``, which
# is as often a port, a path or a parent. Tried only where a run of the option's characters
# begins (the look behind follows the first "-", for the speed above): a start inside the run
# would read it to its end from each.
_PASSWORD_OPTION = (
    r"-(?<![A-Za-z0-9_.-]-)-[A-Za-z0-9_.-]*?"
    + _PASSWORD_WORD
    + r"(?![A-Za-z0-9_-])[ \t]++(?!-)"
    + _ASSIGNED_VALUE
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
    (
        # Tried only where a run of base64url's characters begins, after any "-" and "_"
        # leading it (kept as they are), and never given back: a start after a "-" or "_"
        # inside a run read to its end from every "eyJ" in it ("eyJ-" repeated, 200 KB, held
        # a server 24 s). A token glued to a word (``id-eyJ...``) is no longer found as one.
        "jwt",
        re.compile(
            r"(?<![A-Za-z0-9_-])[_-]*+"
            r"(eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+)"
        ),
    ),
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
        # Tried only where a run of the scheme's characters begins, and never given back what a
        # run took: every start inside a run, each reading to its end, cost a text of letters
        # the square of its length (a 150 KB decision held the server 44 s). A run's digits
        # and ``+.-`` before its first letter are matched too, and kept as they are.
        # A password may hold a "/" (``https://bob:ab/cd@host``, as people write it), but not
        # "//": so it ends before the next URL's scheme, and a start reads no further than the
        # next one's ``://`` (a "/" read to the text's end from every scheme is the square
        # again). Not one of digits up to a "/", "?", "#" or the end, which is a port
        # (``http://host:8080/@scope``, ``http://localhost:3000?next=/@me``), nor a user
        # holding "[" (an IPv6 host: ``http://[::1]:8080/@x``).
        "url_credential",
        re.compile(
            r"(?<![A-Za-z0-9+.-])[0-9+.-]*+[A-Za-z][A-Za-z0-9+.-]*+"
            r"://[^\s/:@\"'<>\[\]]*+:(?!\[REDACTED:)(?![0-9]*+(?:[/?#]|\Z))((?:[^\s/@\"'<>]|/(?!/))++)@"
        ),
    ),
    (
        "password",
        re.compile(
            _NAME_IN_TEXT
            + r"(?![A-Za-z0-9_-])\\?[\"']?\s*+"
            + _OPERATOR
            + r"\s*+"
            + _ASSIGNED_VALUE
            + "|"
            + _PASSWORD_OPTION
        ),
    ),
]


# The gate's heads: what every match of a kind's pattern starts with, as bytes of UTF-8 for
# Hyperscan (so no Unicode mode, whose case folding and ``\s`` differ from Python's: a lone
# surrogate, valid in JSON, could not be scanned in it either). Lookarounds are left out, so a
# head matches wherever its pattern does, and sometimes where it does not.
#
# Python's IGNORECASE (on str) also takes these for ASCII letters (``tests/saves/
# test_redaction.py`` checks the list against every code point), and ``\s`` is Unicode's
# whitespace and the four separators U+001C-U+001F.
_CASE_VARIANTS = {"i": "\u0130\u0131", "k": "\u212a", "s": "\u017f"}
_WHITESPACE = (
    r"(?:[\t-\r\x1c-\x20]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]"
    r"|\xe2\x81\x9f|\xe3\x80\x80)"
)


def _utf8(char: str) -> str:
    return "".join(f"\\x{byte:02x}" for byte in char.encode())


def _caseless(words: str) -> str:
    """``words`` (a regular expression whose letters are all literal) as ``(?i:words)``
    matches in Python, for a bytewise engine."""
    parts = []
    for char in words:
        if "a" <= char.lower() <= "z":
            variants = [f"[{char.lower()}{char.upper()}]"]
            variants += [_utf8(variant) for variant in _CASE_VARIANTS.get(char.lower(), "")]
            parts.append(f"(?:{'|'.join(variants)})" if len(variants) > 1 else variants[0])
        else:
            parts.append(char)
    return "".join(parts)


_HEADS: dict[str, str] = {
    "private_key": r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY",
    "jwt": r"eyJ[A-Za-z0-9_-]{8}",
    "api_key": (
        r"sk-ant-|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20}|gh[pousr]_|github_pat_|glpat-"
        r"|xox[abposr]-|AIza|(?:sk|rk)_(?:live|test)_|hf_|gsk_|xai-|npm_|SG\."
    ),
    "cloud_access_key": (
        r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}"
        + f"|(?:{_caseless('aws_secret_access_key|aws_session_token')}){_WHITESPACE}*[:=]"
        + f"|(?:{_caseless('AccountKey|SharedAccessKey')})="
    ),
    "bearer_token": f"{_caseless('bearer')}{_WHITESPACE}+[A-Za-z0-9._~+/-]{{12}}",
    "basic_auth": f"{_caseless('authorization')}\\\\?[\"']?{_WHITESPACE}*[:=]",
    "url_credential": r"[A-Za-z][A-Za-z0-9+.-]*://[^\t-\r /:@\"'<>]*:[^\t-\r @\"'<>]+@",
    # Every operator begins with ``:`` or ``=``; a password's name glued to its owner
    # (``dbPassword``, ``dbPwd``, ``PGPASSWORD``) is matched by its word alone, the head having
    # no lookbehind, and so is the word of which password it is (``password_confirmation``).
    "password": (
        f"(?:{_caseless(_SECRET_NAMES)})(?:{_caseless(_WHICH_PASSWORDS)})?"
        f"\\\\?[\"']?{_WHITESPACE}*[:=]"
        f"|--[A-Za-z0-9_.-]*(?:{_caseless(_PASSWORD_WORDS)})[\\t ]"
    ),
}


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


_REPLACEMENTS = [(kind, pattern, _replacement(kind, pattern)) for kind, pattern in _SECRET_PATTERNS]
_KINDS = [kind for kind, _pattern in _SECRET_PATTERNS]


def _gate_database() -> hyperscan.Database:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        expressions=[_HEADS[kind].encode() for kind in _KINDS],
        ids=list(range(len(_KINDS))),
        elements=len(_KINDS),
    )
    return database


_GATE = _gate_database()
# A scan needs scratch space of its own: one for each thread that scans (sync routes run in
# a thread pool, and the scan lets go of the GIL).
_scratch = threading.local()


def _scratch_space() -> hyperscan.Scratch:
    space: hyperscan.Scratch | None = getattr(_scratch, "space", None)
    if space is None:
        space = _scratch.space = _GATE.scratch.clone()
    return space


def _found_kinds(texts: list[str]) -> dict[int, set[str]]:
    """Which texts (by index) hold the head of which kinds. One scan over the texts joined
    by newlines: a match within one text is a match in the whole, and one across two only
    sends both to the patterns, which then find nothing."""
    joined = "\n".join(texts)
    # surrogatepass: a lone surrogate (valid JSON) is no part of any head.
    data = joined.encode("utf-8", "surrogatepass")
    found: dict[int, set[str]] = {}
    wide = len(data) != len(joined)
    # Each text's characters before it, but for the newlines (made on the first match).
    before: list[int] = []
    # The bytes of the text the last match fell in, with its newline: its next matches are
    # added without a look-up (a text may repeat a head thousands of times; a list of every
    # match cost a 4 MB text 150 MB, 2026-11-27). And how far ``data`` is decoded, in bytes
    # and in characters.
    first, past = 0, 0
    kinds: set[str] = set()
    decoded, characters = 0, 0

    def locate(last: int) -> None:
        """The text holding byte ``last``: its index, found from the characters up to it
        (decoded in C, in order; encoding every text to learn its bytes cost twice the
        scan), and its bytes."""
        nonlocal first, past, kinds, decoded, characters
        if not before:
            before.extend(accumulate(map(len, texts), initial=0))
        boundary = last + 1
        if wide:
            while boundary < len(data) and 0x80 <= data[boundary] < 0xC0:
                boundary += 1  # to the end of the character byte ``last`` is in
            if boundary < decoded:  # a match out of order: decode again from the start
                decoded, characters = 0, 0
            characters += len(data[decoded:boundary].decode("utf-8", "surrogatepass"))
            decoded = boundary
        else:
            characters = boundary
        text = bisect_right(range(len(texts)), characters - 1, key=lambda i: before[i] + i) - 1
        start, end = before[text] + text, before[text + 1] + text + 1
        if wide:
            first = boundary - len(joined[start:characters].encode("utf-8", "surrogatepass"))
            past = first + len(joined[start:end].encode("utf-8", "surrogatepass"))
        else:
            first, past = start, end
        kinds = found.setdefault(text, set())

    def on_match(kind: int, _start: int, end: int, _flags: int, _context: object) -> None:
        if not first <= end - 1 < past:
            locate(end - 1)
        kinds.add(_KINDS[kind])

    _GATE.scan(data, match_event_handler=on_match, scratch=_scratch_space())
    return found


def holds_a_head(data: bytes) -> bool:
    """Whether the gate finds the head of any pattern in ``data`` (UTF-8).

    In JSON whose only escapes are quotes (``\\"``), no head means nothing for
    ``redact_document`` to redact. Every other character of a string stands as it is in the
    text, and no head matches across a quote but the ones that allow a backslash before it
    (``password``, ``basic_auth``): so no text holds a head. And no key names a secret: a key
    is followed by its quote and colon, which the ``password`` head matches after the name
    (a password word glued to the name before it too, ``dbPassword":``: a head has no look
    behind)."""

    def on_match(_kind: int, _start: int, _end: int, _flags: int, _context: object) -> bool:
        return True  # the first is enough: the scan stops (ScanTerminated)

    try:
        _GATE.scan(data, match_event_handler=on_match, scratch=_scratch_space())
    except hyperscan.ScanTerminated:
        return True
    return False


def _redact_found(text: str, kinds: set[str], counts: Counter[str]) -> str:
    """``text`` through the patterns of the kinds the gate found in it, most specific first.
    Once one has replaced something the text is no longer what the gate saw: every later
    pattern runs."""
    replaced = False
    for kind, pattern, replacement in _REPLACEMENTS:
        if replaced or kind in kinds:
            text, found = pattern.subn(replacement, text)
            if found:
                counts[kind] += found
                replaced = True
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


@dataclass(frozen=True)
class _Texts:
    """A document's texts, as the walk meets them: its string values in order, its distinct
    keys, and how many string values each container holds at any depth (by ``id``)."""

    values: list[str]
    keys: set[str]
    sizes: dict[int, int]


def _texts(document: Any) -> _Texts:
    values: list[str] = []
    keys: set[str] = set()
    sizes: dict[int, int] = {}

    def collect(node: dict[str, Any] | list[Any]) -> None:
        first = len(values)
        if type(node) is dict:
            keys.update(node)
        for item in node.values() if type(node) is dict else node:
            if type(item) is str:
                values.append(item)
            elif type(item) is dict or type(item) is list:
                collect(item)
        sizes[id(node)] = len(values) - first

    if type(document) is dict or type(document) is list:  # a string: ``redact_document``
        collect(document)
    return _Texts(values, keys, sizes)


class _Walker:
    """One document's walk, given what the gate found: the string values (by their place in
    the walk) and the keys that hold a head, with the kinds, and the keys that name a secret.
    A string value with nothing found is stepped over, and so, when no key is among them, is a
    container holding no value found: without a call, a path or a look-up per member, so that
    a large document with a few secrets costs its few branches (a 1 MB save's walk went from
    1.2 ms to 0.3)."""

    def __init__(
        self,
        redactions: Redactions,
        texts: _Texts,
        found_values: dict[int, set[str]],
        found_keys: dict[str, set[str]],
        secret_keys: set[str],
    ) -> None:
        self.redactions = redactions
        self.found_values = found_values
        self.found_keys = found_keys
        self.secret_keys = secret_keys
        self.sizes = None if found_keys or secret_keys else texts.sizes
        self.place = 0  # of the next string value in the walk
        # The places found, in the walk's order, and the next of them (past the last: none).
        self.ahead = iter(sorted(found_values))
        self.past_last = len(texts.values)
        self.next_found = next(self.ahead, self.past_last)
        self.path: list[str] = []

    def pointer(self) -> str:
        return "".join("/" + _escape(part) for part in self.path)

    def take_place(self) -> set[str] | None:
        """The next string value's place taken: the kinds found in it (None: nothing)."""
        place = self.place
        self.place += 1
        if place != self.next_found:
            return None
        self.next_found = next(self.ahead, self.past_last)
        return self.found_values[place]

    def text(self, value: str, kinds: set[str] | None) -> str:
        if kinds is None:
            return value
        counts: Counter[str] = Counter()
        redacted = _redact_found(value, kinds, counts)
        if counts:
            self.redactions.add(self.pointer(), counts)
        return redacted

    def named_value(self, value: str) -> str:
        """The whole value of a member named as a secret."""
        if not value or value.startswith(MARKER_START):
            return value
        self.redactions.add(self.pointer(), Counter(password=1))
        return MARKER.format(kind="password")

    def named_values(self, items: list[Any]) -> list[Any]:
        """A list under a member named as a secret (``"password": ["a", "b"]``): each string
        in it, and in the lists inside it, whole; an object in it is walked as any other."""
        for index, item in enumerate(items):
            self.path.append(str(index))
            if type(item) is str:
                self.take_place()
                items[index] = self.named_value(item)
            elif type(item) is list:
                self.named_values(item)
            elif type(item) is dict:
                self.members(item)
            self.path.pop()
        return items

    def key(self, key: str, taken: dict[str, Any]) -> str:
        redacted = self.text(key, self.found_keys.get(key))
        if redacted == key:
            return key
        # Two keys that redact alike must both be kept: the later one gets a number.
        unique, number = redacted, 2
        while unique in taken:
            unique, number = f"{redacted}#{number}", number + 1
        return unique

    def passes_over(self, item: Any) -> bool:
        """True, with the walk moved past it, when ``item`` holds no value found (a container
        only when no key is to change); a number, a boolean or null holds none."""
        kind = type(item)
        if kind is str:
            if self.place == self.next_found:
                return False
            self.place += 1
            return True
        if kind is not dict and kind is not list:
            return True
        if self.sizes is None:
            return False
        end = self.place + self.sizes[id(item)]
        if end > self.next_found:
            return False
        self.place = end
        return True

    def walk(self, value: Any) -> Any:
        if type(value) is str:
            return self.text(value, self.take_place())
        if type(value) is list:
            for index, item in enumerate(value):
                if not self.passes_over(item):
                    self.path.append(str(index))
                    value[index] = self.walk(item)
                    self.path.pop()
        elif type(value) is dict:
            self.members(value)
        return value

    def members(self, node: dict[str, Any]) -> None:
        if self.sizes is not None:
            # No key changes: only the members holding a value found are visited.
            for key, item in node.items():
                if not self.passes_over(item):
                    self.path.append(key)
                    node[key] = self.walk(item)
                    self.path.pop()
            return
        renamed: dict[str, Any] | None = None
        for key, item in node.items():
            new_key = self.key(key, renamed if renamed is not None else node)
            self.path.append(new_key)
            if type(item) is str and key in self.secret_keys:
                self.take_place()
                item = self.named_value(item)
            elif type(item) is list and key in self.secret_keys:
                item = self.named_values(item)
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
    if type(document) is str:
        # A message, a pointer's key: one scan, and nothing more when it finds nothing.
        found = _found_kinds([document])
        if not found:
            return document
        texts, keys = _Texts([document], set(), {}), []
    else:
        texts = _texts(document)
        keys = list(texts.keys)
        found = _found_kinds(texts.values + keys)
    values = len(texts.values)
    found_values = {place: kinds for place, kinds in found.items() if place < values}
    found_keys = {keys[place - values]: kinds for place, kinds in found.items() if place >= values}
    secret_keys = {key for key in keys if names_a_secret(key)}
    if not found and not secret_keys:
        return document
    walker = _Walker(redactions, texts, found_values, found_keys, secret_keys)
    return walker.walk(document)


def redact_value(value: Any) -> Any:
    """``redact_document`` for text that is not a document (a message, a problem): the sites
    are not wanted. Text in which the gate finds nothing (every request's log line) is
    answered before a ``Redactions`` is made: its ``Counter`` cost 1.6 µs of 5.4."""
    if type(value) is str and not _found_kinds([value]):
        return value
    return redact_document(value, Redactions())


def redact_pointer(pointer: str) -> str:
    """A JSON Pointer with any secret in its keys redacted: each key is redacted unescaped,
    as it stands in the document (escaped, ``://`` reads ``:~1~1``)."""
    if not pointer.startswith("/"):
        redacted: str = redact_value(pointer)
        return redacted
    parts = (part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/"))
    return "".join("/" + _escape(redact_value(part)) for part in parts)
