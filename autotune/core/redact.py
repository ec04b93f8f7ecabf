"""Credentials out of what is printed or stored: a storage URL's password becomes '***'.

This covers `--storage postgresql://user:PASSWORD@host/db` and `?password=...`, wherever a URL,
a command line or an error message reaches a record, a log line or the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from urllib.parse import unquote

MASK = "***"

# scheme://user:PASSWORD@ : the user runs to the first ':' (RFC 3986 user names hold none); the
# password to the last '@' of the URL, so that one holding an unescaped '@' or '/' is hidden
# whole (a URL whose path or query holds an '@' loses more than its password: never less).
_USERINFO = r"([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@'\"]*:)"
# Where a URL's user part is looked for: only from the start of a run of scheme characters (a
# search tried from every letter of a long word scanned the rest of the word each time, which
# took quadratic time: minutes on a 130,000-letter argument). Leading digits or signs of the run
# are not the scheme's.
_START = re.compile(r"(?<![A-Za-z0-9+.\-])[0-9+.\-]*" + _USERINFO)
_TOKEN_END = re.compile(r"[\s'\"]")
# ...?password=SECRET&... (libpq and most drivers take credentials as query parameters too)
_KEYS = r"(?:password|passwd|pwd|pass|sslpassword|secret|token|api_key|apikey|access_key)"
_PARAM = re.compile(r"((?:^|[?&;\s])" + _KEYS + r"=)([^&;\s'\"]*)", re.IGNORECASE)


def url(text: str) -> str:
    """Mask the credentials of one URL (a storage URL, or one argument of a command line)."""
    return _mask(text, whole=True)


def text(message: str, secrets: Iterable[str | None] = ()) -> str:
    """Mask every URL in free text (an error message, a joined command line), and any of `secrets`.

    `secrets` are the passwords of the URLs the text may quote; they are masked wherever they stand.
    """
    for secret in secrets:
        if secret and len(secret) >= 3:  # a one- or two-letter password would mask half the text
            message = message.replace(secret, MASK)
    return _mask(message, whole=False)


def argv(args: Sequence[str]) -> list[str]:
    """Mask each of a command line's arguments as a URL (an argument may hold spaces)."""
    return [url(a) for a in args]


def secrets(storage_url: str) -> list[str]:
    """Return the passwords a URL carries (in its user part or its query), as written and decoded.

    They are for masking a message that quotes them otherwise (a driver's own text).
    """
    found = [m.group(2) for m in _PARAM.finditer(storage_url)]
    m = re.match(_USERINFO + r"(.*)@", storage_url, re.DOTALL)
    found += [m.group(2)] if m else []
    return [v for s in found for v in dict.fromkeys((s, unquote(s)))]


def _mask(s: str, whole: bool) -> str:
    """Return `s` with each URL's password and each password parameter masked, in linear time.

    A password runs to the last '@' of the string (`whole`: one URL, which may hold spaces) or of
    its word (free text: up to a blank or a quote).
    """
    out, done, pos = [], 0, 0
    end = at = -1  # the end of the word the last user part was in, and the last '@' in it after it
    while m := _START.search(s, pos):
        if m.end() > end:  # a new word: its end and last '@' found once, however many URLs it holds
            found = None if whole else _TOKEN_END.search(s, m.end())
            end = found.start() if found else len(s)
            at = s.rfind("@", m.end(), end)
        if at < m.end():  # no '@' left in the word: no later user part in it has a password
            pos = end
            continue
        out += [s[done : m.start(1)], m.group(1), MASK, "@"]
        done = pos = at + 1
    out.append(s[done:])
    return _PARAM.sub(lambda m: m.group(1) + MASK, "".join(out))
