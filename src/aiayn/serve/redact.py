"""What the server writes where others read it (its log, its error messages, its open routes)
without its secrets or the host's directories: an API key in a query string (``redact_target``,
read as the access check reads the query: ``query_items``), a password in a storage address
(``masked_url``, ``without_secret``), a path in an error message (``without_paths``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote

KEY_FIELD = "api_key"  # LibreTranslate's name of the key in a body or a query string
MASK = "***"
REDACTED = "REDACTED"


def query_items(query: str, errors: str = "strict") -> list[tuple[str, str, str]]:
    """The fields of a query string as LibreTranslate reads them (Flask's ``request.values``,
    the standard library's ``parse_qsl``): split at "&", a "+" a space, names and values
    percent-decoded as UTF-8 (``api%5Fkey`` and ``%61pi_key`` are ``api_key``), a field
    without "=" an empty value; each as (its text as sent, name, value). ``errors``: the
    decoding's ("strict": ``UnicodeDecodeError`` for a field that is not UTF-8 once decoded;
    "replace": U+FFFD for its bytes)."""
    items = []
    for sent in query.split("&"):
        for name, value in parse_qsl(sent, keep_blank_values=True, errors=errors):
            items.append((sent, name, value))
    return items


def is_key_field(name: str) -> bool:
    """Whether a field named ``name`` (decoded) is an API key to keep out of a log: the access
    check reads ``api_key``; any case and spaces around it are kept out too."""
    return name.strip().lower() == KEY_FIELD


def redact_query(query: str) -> str:
    """``query`` with the value of every API key field, however its name is spelled
    (``api_key``, ``api%5Fkey``, ``%61pi_key``...), written ``REDACTED`` (an empty one left
    as it is); the rest as sent. Fields are split at ";" as well as "&" (some servers read
    both), which redacts more, never less."""
    parts = re.split(r"([&;])", query)
    for i in range(0, len(parts), 2):
        fields = query_items(parts[i], errors="replace")
        if fields and is_key_field(fields[0][1]) and fields[0][2]:
            parts[i] = f"{parts[i].split('=', 1)[0]}={REDACTED}"
    return "".join(parts)


def redact_target(target: str) -> str:
    """A request target as the access log writes it (path, then "?" and the query string as
    sent): its query without API keys (``redact_query``)."""
    path, sep, query = target.partition("?")
    return path + sep + redact_query(query) if sep else target


def url_passwords(url: str) -> list[str]:
    """The passwords a URL holds (``redis://:PASSWORD@host``, ``redis://user:PASSWORD@host``,
    a query's ``password=``), as written."""
    userinfo = _split(url)[1]
    found = [userinfo.split(":", 1)[1]] if userinfo and ":" in userinfo else []
    return found + re.findall(r"[?&]password=([^&#]*)", url, re.IGNORECASE)


def _split(url: str) -> tuple[str, str | None, str]:
    """(what comes before the user information, the user information or None, the rest);
    a URL without "://" (mistyped) is read from its start."""
    scheme, sep, rest = url.partition("://")
    head = scheme + sep if sep else ""
    rest = rest if sep else url
    userinfo, at, after = rest.rpartition("@")  # the last "@": one in the password is its own
    return (head, userinfo, after) if at else (head, None, rest)


def masked_url(url: str) -> str:
    """``url`` as the server shows it (errors, logs): its password written ``***`` (the user
    name, host, port and database kept, to recognise the address by)."""
    head, userinfo, rest = _split(url)
    if userinfo and ":" in userinfo:
        url = f"{head}{userinfo.split(':', 1)[0]}:{MASK}@{rest}"
    return re.sub(r"([?&]password=)[^&#]*", rf"\g<1>{MASK}", url, flags=re.IGNORECASE)


def without_secret(text: str, url: str) -> str:
    """``text`` (an error message that may quote ``url`` or its password) with ``url`` masked
    and its password, as written or percent-decoded, replaced by ``***``."""
    text = text.replace(url, masked_url(url))
    for password in url_passwords(url):
        for spelling in {password, unquote(password)} - {""}:
            text = text.replace(spelling, MASK)
    return text


# an absolute path of two or more parts (/srv/models/de-en/config.json), not one inside a URL
# or a relative path (the character before it is none of a name's or a URL's)
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])(?:/[^\s/'\"`:;,()\[\]{}<>|]+){2,}/?")


def without_paths(text: str, known: Mapping[str, str] | None = None) -> str:
    """``text`` (an error message for a client) without the host's directories: each of
    ``known`` (a path as the server was given it, relative too) replaced by its name there,
    and any other absolute path by its last part (``/srv/models/de-en/config.json`` ->
    ``config.json``)."""
    for path, name in sorted((known or {}).items(), key=lambda kv: -len(kv[0])):
        if path:
            text = text.replace(path, name)
    return _ABSOLUTE_PATH.sub(lambda m: m.group().rstrip("/").rsplit("/", 1)[-1], text)
