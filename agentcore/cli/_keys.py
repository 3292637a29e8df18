"""``agentcore keys set NAME | list | path``: API keys kept in ``<config dir>/keys.json``.

The file maps a provider name to its key (``{"openai": "sk-..."}``) and is created with
permissions ``0600`` (see :func:`agentcore.cli._config.write_json_map`: never readable by others,
not even while it is written). ``keys set`` changes it under a lock, so two run at once both store
their key. ``keys set`` reads the key from a hidden prompt (``getpass``) or,
when stdin is piped, from its first line: never from the command line, where it would land in the
shell history and the process list. ``keys list`` prints the names only; no command prints a key.

A stored key is the last resort: ``--api-key-env NAME`` wins, then the provider's usual
environment variable (``OPENAI_API_KEY``, ...), then ``keys.json`` (:func:`stored_key`).
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, TextIO

from ._config import config_path, read_json_map, update_json_map
from ._setup import UsageError

__all__ = ["KEYS_FILE", "keys_path", "stored_key", "stored_keys", "cmd_keys_set", "cmd_keys_list", "cmd_keys_path"]

KEYS_FILE = "keys.json"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def keys_path() -> str:
    return config_path(KEYS_FILE)


def stored_key(provider: str) -> Optional[str]:
    """The key stored for ``provider`` without surrounding whitespace, or None (no file, no entry,
    an entry of whitespace only, or the provider's environment variable is set: the environment
    wins). :class:`UsageError` naming the file (never the key) for a broken keys file and for a
    key a hand edit left holding a control character (no provider could send it)."""
    from ..providers.base import ProviderError, clean_api_key, get_env_api_key

    if not provider or get_env_api_key(provider):
        return None
    path = keys_path()
    try:
        return clean_api_key(read_json_map(path).get(provider), f"{path}: the key of {provider}")
    except ProviderError as exc:
        raise UsageError(f"{exc}; store it again: agentcore keys set {provider}") from None


def stored_keys() -> List[str]:
    """Every key in the keys file (to mask them); none when it is missing or broken."""
    try:
        keys = read_json_map(keys_path())
    except UsageError:
        return []
    return [key for key in keys.values() if isinstance(key, str) and key]


def cmd_keys_set(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore keys set NAME``: store a key read from a hidden prompt or piped stdin."""
    name = args.name
    if not _NAME.match(name):
        raise UsageError(f"keys set {name!r}: a key name is a provider name such as openai or anthropic")
    key = _read_key(name, stdin, err)
    if not key:
        raise UsageError(f"keys set {name}: the key is empty; nothing was stored")
    path = keys_path()
    update_json_map(path, lambda keys: keys.update({name: key}), mode=0o600)  # locked: a concurrent set is kept
    _warn_unknown_provider(name, err)
    err.write(f"stored the key of {name} in {path}\n")
    return 0


def _read_key(name: str, stdin: TextIO, err: TextIO) -> str:
    """The key typed or piped, stripped; UsageError (naming the problem, never the key) when it
    is not UTF-8 text or holds a control character: stored, it would fail every later run."""
    from ..providers.base import ProviderError, clean_api_key

    not_utf8 = UsageError(f"keys set {name}: the key is not UTF-8 text; nothing was stored")
    try:
        key = _read_raw_key(name, stdin, err)
    except UnicodeDecodeError:  # a strict stdin
        raise not_utf8 from None
    if any("\ud800" <= c <= "\udfff" for c in key):  # undecodable bytes of a surrogateescape stdin
        raise not_utf8
    try:
        return clean_api_key(key, "the key") or ""
    except ProviderError as exc:
        raise UsageError(f"keys set {name}: {exc}; nothing was stored") from None


def _read_raw_key(name: str, stdin: Optional[TextIO], err: TextIO) -> str:
    """The line typed or piped; "" when there is none (end of input, a closed stdin: ``<&-``)."""
    if stdin is None:  # Python's sys.stdin when descriptor 0 is closed
        return ""
    if _isatty(stdin):
        import getpass

        try:
            return getpass.getpass(f"Enter key for {name}: ", stream=err)
        except EOFError:
            return ""
    try:
        return stdin.readline() or ""
    except UnicodeDecodeError:
        raise
    except (OSError, ValueError):  # a closed stdin
        return ""


def _warn_unknown_provider(name: str, err: TextIO) -> None:
    """A note when ``name`` names no provider of the catalog or plugins (a typo stores a key
    nothing will read)."""
    import warnings

    from ..providers.base import ENV_API_KEYS

    if name in ENV_API_KEYS:
        return
    try:
        from ..plugins import models

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            known = {m.provider for m in models()} | set(ENV_API_KEYS) | {"local"}
    except Exception:  # noqa: BLE001 - only a hint: never fail the command over it
        return
    if name not in known:
        import difflib

        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        err.write(f"note: no provider is called {name!r}{hint}; the key is stored under that name anyway\n")


def cmd_keys_list(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore keys list``: the names of the stored keys, one a line (never the keys)."""
    names = sorted(read_json_map(keys_path()))
    if not names:
        err.write(f"no keys stored in {keys_path()}; add one with: agentcore keys set PROVIDER\n")
    for name in names:
        out.write(name + "\n")
    return 0


def cmd_keys_path(args: Any, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``agentcore keys path``: where the keys file is (it may not exist yet)."""
    out.write(keys_path() + "\n")
    return 0


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
