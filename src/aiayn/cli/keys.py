"""``keys``: the API keys of ``aiayn serve --api-keys`` (``add``, ``remove``, ``list``, and
``import`` from LibreTranslate's database), in the server's SQLite file
(``aiayn.serve.keys``)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from aiayn.cli.args import int_range
from aiayn.errors import UserError


def add_keys(sub) -> None:
    from aiayn.serve.keys import DEFAULT_DB, MIN_KEY_LENGTH

    p = sub.add_parser("keys", help="API keys of aiayn serve --api-keys: add, remove, list, import")
    p.add_argument(
        "--db",
        "--api-keys-db",
        dest="db",
        default=DEFAULT_DB,
        help=f"the keys' SQLite file (default: {DEFAULT_DB} here, as aiayn serve's)",
    )
    actions = p.add_subparsers(dest="action", required=True)
    add = actions.add_parser(
        "add", help="add a key (a new random one, printed: shown only now; or --key's)"
    )
    add.add_argument(
        "--key",
        help="the key to store (for scripted set-ups; any text, as LibreTranslate's ltmanage "
        f"takes it, with a warning below {MIN_KEY_LENGTH} characters; '-' reads it from "
        "standard input, out of the shell's history and the process list; default: a new "
        "random key)",
    )
    add.add_argument(
        "--req-limit",
        type=int_range(1),
        help="this key's requests per minute (default: the server's --req-limit)",
    )
    add.add_argument(
        "--char-limit",
        type=int_range(1),
        help="this key's characters per text (at most the server's --max-chars)",
    )
    add.add_argument(
        "--char-quota",
        type=int_range(1),
        help="characters this key may translate a month on DeepL's routes (/v2/translate, "
        "/v2/document; 456 past it; default: no limit), counted in this database",
    )
    add.add_argument("--name", default="", help="a note to recognise the key by in the list")
    remove = actions.add_parser("remove", help="remove a key, given whole or by its id")
    remove.add_argument("key", help="the key, or its id (aiayn keys list)")
    actions.add_parser("list", help="every key's id, name and limits (never the key)")
    imported = actions.add_parser(
        "import",
        help="add the keys of LibreTranslate's key database (db/api_keys.db: keys in plain "
        "text) with their req_limit and char_limit; run again, it adds what is new",
    )
    imported.add_argument("lt_db", metavar="LT_DB", help="LibreTranslate's api_keys.db")
    imported.add_argument(
        "--name", default="libretranslate", help="the imported keys' note in the list"
    )
    p.set_defaults(func=cmd_keys)


def cmd_keys(args: argparse.Namespace) -> None:
    from aiayn.serve.keys import KeyStore, key_warnings

    entries = None
    if args.action == "import":  # read and checked whole before the target is opened
        from aiayn.serve.libretranslate_keys import read_libretranslate_keys

        entries = read_libretranslate_keys(args.lt_db)
    store = KeyStore(args.db, create=args.action in ("add", "import"))
    try:
        if entries is not None:
            _import(store, entries, args)
        elif args.action == "add":
            given = args.key
            if given == "-":
                given = sys.stdin.readline().strip()
                if not given:
                    raise UserError("--key -: standard input held no key")
            try:
                key, record = store.add(
                    given,
                    name=args.name,
                    req_limit=args.req_limit,
                    char_limit=args.char_limit,
                    char_quota=args.char_quota,
                )
            except ValueError as e:
                raise UserError(f"--key: {e}") from None
            for warning in key_warnings(key) if given is not None else []:
                warnings.warn(f"--key: {warning}", stacklevel=1)
            if given is None:  # a new key: shown now, never again
                print(key)
                kept = " (the key itself is not kept: copy it now)"
            else:  # the caller has it: not echoed into a script's log
                kept = ""
            print(f"stored as id {record.id} in {args.db}{kept}", file=sys.stderr)
        elif args.action == "remove":
            try:
                record = store.remove(args.key)
            except KeyError as e:
                raise UserError(e.args[0]) from None
            print(f"removed {record.id}", file=sys.stderr)
        else:
            print("id\treq_limit\tchar_limit\tchar_quota\tcreated\tname")
            for k in store.all():
                created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(k.created))
                limits = [
                    str(v) if v is not None else "-"
                    for v in (k.req_limit, k.char_limit, k.char_quota)
                ]
                print("\t".join([k.id, *limits, created, k.name]))
    finally:
        store.close()


def _import(store, entries, args: argparse.Namespace) -> None:
    """LibreTranslate's keys into ``store``: what was added, updated and already there, on
    stderr, and a warning naming the keys LibreTranslate took that are weak here."""
    from aiayn.serve.keys import ID_LENGTH, digest, key_warnings

    done = store.add_many([(e.key, e.req_limit, e.char_limit) for e in entries], name=args.name)
    weak = [digest(e.key)[:ID_LENGTH] for e in entries if key_warnings(e.key)]
    if weak:
        shown = ", ".join(weak[:10]) + (f" and {len(weak) - 10} more" if len(weak) > 10 else "")
        warnings.warn(
            f"{len(weak)} of the keys are weak here (shorter than 16 characters, or spaces or "
            f"control characters in them; ids {shown}): imported as LibreTranslate took them; "
            "replace them with new keys (aiayn keys add) when you can",
            stacklevel=1,
        )
    new, updated, unchanged = (len(done[k]) for k in ("new", "updated", "unchanged"))
    print(
        f"{len(entries)} keys of {args.lt_db} in {args.db}: {new} new, {updated} already there "
        f"with other limits (now LibreTranslate's), {unchanged} already there as they are",
        file=sys.stderr,
    )
