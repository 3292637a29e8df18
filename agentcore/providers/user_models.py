"""The user's own ``models.json``: models added to (or changed in) the catalog without code.

Where: ``$AGENTCORE_MODELS`` (a path; set it empty to use no file), else
``~/.agentcore/models.json`` (the directory that also holds the CLI's sessions). A missing
default file means no user models; a ``$AGENTCORE_MODELS`` naming a missing file is an error. The file is read when the model registry is first built (``get_model``,
``models()``, ``agentcore models``), never at ``import agentcore``.

The format (keys as in the catalog, the reference's JSON shape)::

    {"models": [{"id": "llama3.2", "provider": "ollama", "api": "openai-completions",
                 "baseUrl": "http://127.0.0.1:11434/v1", "contextWindow": 32768},
                {"provider": "openai", "id": "gpt-4o", "baseUrl": "https://proxy.example/v1"}],
     "providers": {"my-vllm": {"api": "openai-completions", "baseUrl": "http://gpu:8000/v1",
                               "models": [{"id": "Qwen/Qwen3-8B", "reasoning": true}]}}}

An entry whose ``provider/id`` is in the shipped catalog is merged over the catalog's entry (the
keys given replace the catalog's; ``cost``, ``headers`` and ``compat`` are merged key by key), so
one line re-points a catalog model. Any other entry is a new model and needs ``id``, ``provider``
and ``api``. Under ``providers``, ``api``, ``baseUrl``, ``headers`` and ``compat`` are defaults
for that provider's listed models, and ``baseUrl``/``headers``/``compat`` also apply to every
catalog model of that provider the block does not list (``{"providers": {"anthropic": {"baseUrl":
...}}}`` routes all of them through a proxy, as in the reference), a top-level entry of such a
model included. A model's own keys win over these defaults, ``headers`` and ``compat`` key by key
(a model adding one header keeps the block's others). A ``provider/id`` may be given once: a second
entry is an error naming both; so is a key given twice in one JSON object (a second ``providers``
block of one name), which JSON would otherwise keep only the last of. Entries are registered by this built-in plugin after every installed plugin, so they
win. The file is UTF-8, with or without a BOM.

A malformed file raises :class:`UserModelsError` naming the file and the entry (``models[2]
(ollama/llama3)``): a field of the wrong type, a price that is negative or not finite, a header
that HTTP cannot carry (named, its value never shown), a ``thinkingLevelMap`` level that does not
exist or a value that is neither a string nor null. Through the registry the error is reported
like any failing plugin (a warning, ``agentcore plugins``), the catalog stays usable, and none of
the file's models is registered.
API keys do not belong in the file (``apiKey`` is refused): use the provider's environment
variable, ``api_key=`` or ``get_api_key``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from .._errors import PicklableError
from ..hookspecs import hookimpl
from ..options import header_problem
from ..types import Model

__all__ = ["MODELS_ENV", "UserModelsError", "user_models_path", "load_user_models", "register_models"]

MODELS_ENV = "AGENTCORE_MODELS"

_STRINGS = ("id", "name", "api", "provider", "baseUrl")
_COUNTS = ("contextWindow", "maxTokens")
_PRICES = ("input", "output", "cacheRead", "cacheWrite")
_MAPPINGS = ("headers", "compat", "thinkingLevelMap")
_ENTRY_KEYS = frozenset(_STRINGS + _COUNTS + _MAPPINGS + ("reasoning", "input", "cost"))
_PROVIDER_KEYS = frozenset({"api", "baseUrl", "headers", "compat", "models"})
_INPUTS = frozenset({"text", "image"})
_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")


class UserModelsError(PicklableError, ValueError):
    """The user's models file is malformed; the message names the file and the entry."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def user_models_path(env: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """``$AGENTCORE_MODELS``, else ``~/.agentcore/models.json``; None when the variable is empty."""
    env = os.environ if env is None else env
    if MODELS_ENV in env:
        value = env[MODELS_ENV].strip()
        return Path(value).expanduser() if value else None
    return Path.home() / ".agentcore" / "models.json"


def load_user_models(path: Optional[Path] = None) -> List[Model]:
    """The models of the user's file (``path`` or :func:`user_models_path`), in file order.

    Returns ``[]`` when there is no file (also when a folder on its path is a file: a ``HOME`` of
    ``/dev/null``), except that a ``$AGENTCORE_MODELS`` naming a file that
    does not exist is an error (a typo must not silently drop the user's models). Raises
    :class:`UserModelsError` for that, for unreadable or invalid JSON, and for an entry that is not
    a model (naming the entry and the field).
    """
    from_env = False
    if path is None:
        path = user_models_path()
        if path is None:
            return []
        from_env = MODELS_ENV in os.environ
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM (Windows editors write one) is no content
    except (FileNotFoundError, NotADirectoryError):  # also under a HOME that is no folder (/dev/null)
        if from_env:
            raise UserModelsError(path, f"does not exist (${MODELS_ENV}; set it empty for no file)") from None
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise UserModelsError(path, f"cannot be read: {exc}") from None
    try:
        document = json.loads(text, object_pairs_hook=_object)
    except _RepeatedKey as exc:
        raise UserModelsError(path, f"{exc}: give each key once (JSON keeps only the last one)") from None
    except ValueError as exc:
        raise UserModelsError(path, f"is not valid JSON: {exc}") from None
    except RecursionError:
        raise UserModelsError(path, "is nested too deeply to be read as JSON") from None
    return [_model(path, label, entry) for label, entry in _entries(path, document)]


class _RepeatedKey(ValueError):
    """A JSON object of the file names one key twice."""


def _object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    """A JSON object, refusing a repeated key: ``json`` would keep the last one and silently drop
    the first (a second ``"providers"`` block of one name, a second ``"models"`` list)."""
    out: Dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def _entries(path: Path, document: Any) -> List[Tuple[str, Any]]:
    """``(label, entry dict with provider defaults applied)`` for every entry of the document.

    A ``provider/id`` given twice is an error naming both entries. A provider block's catalog
    defaults (``baseUrl``/``headers``/``compat``) go under a top-level entry of the same catalog
    model rather than beside it (two registrations of one key would keep only the first)."""
    if isinstance(document, list):
        document = {"models": document}
    if not isinstance(document, dict):
        raise UserModelsError(path, 'must be a JSON object with "models" and/or "providers"')
    unknown = sorted(set(document) - {"models", "providers"})
    if unknown:
        raise UserModelsError(path, f'unknown top-level key(s) {unknown}: use "models" and/or "providers"')
    out: List[Tuple[str, Any]] = []
    generated: List[Tuple[str, Any]] = []
    models = document.get("models", [])
    if not isinstance(models, list):
        raise UserModelsError(path, '"models" must be a list of model objects')
    out.extend((f"models[{i}]", entry) for i, entry in enumerate(models))
    providers = document.get("providers", {})
    if not isinstance(providers, dict):
        raise UserModelsError(path, '"providers" must be an object: provider name -> settings')
    for name, settings in providers.items():
        where = f"providers[{name!r}]"
        if not isinstance(settings, dict):
            raise UserModelsError(path, f"{where} must be an object")
        if "apiKey" in settings:
            raise UserModelsError(path, f"{where}: API keys do not belong in models.json; {_KEY_HINT}")
        bad = sorted(set(settings) - _PROVIDER_KEYS)
        if bad:
            raise UserModelsError(path, f"{where}: unknown key(s) {bad}; allowed: {sorted(_PROVIDER_KEYS)}")
        entries = settings.get("models", [])
        if not isinstance(entries, list):
            raise UserModelsError(path, f'{where}["models"] must be a list of model objects')
        defaults = {k: v for k, v in settings.items() if k != "models"}
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):
                entry = _with_defaults(entry, {**defaults, "provider": name})
            out.append((f'{where}["models"][{i}]', entry))
        generated.extend(_catalog_overrides(path, where, name, defaults, entries))
    return _combine(path, out, generated)


def _key(entry: Any) -> Optional[Tuple[str, str]]:
    if isinstance(entry, dict) and isinstance(entry.get("provider"), str) and isinstance(entry.get("id"), str):
        return entry["provider"], entry["id"]
    return None


def _combine(path: Path, explicit: List[Tuple[str, Any]], generated: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    """``explicit`` entries (each ``provider/id`` at most once) and the ``generated`` catalog
    overrides of provider blocks, an override of an explicit entry's model folded under it."""
    seen: Dict[Tuple[str, str], int] = {}
    for index, (label, entry) in enumerate(explicit):
        key = _key(entry)
        if key is None:
            continue
        if key in seen:
            first = explicit[seen[key]][0]
            raise UserModelsError(path, f"{label} ({key[0]}/{key[1]}) repeats {first}: give each model once")
        seen[key] = index
    out = list(explicit)
    for label, override in generated:
        key = _key(override)
        if key is None or key not in seen:
            out.append((label, override))
            continue
        first, entry = out[seen[key]]
        out[seen[key]] = (first, _with_defaults(entry, override))
    return out


def _with_defaults(entry: Dict[str, Any], defaults: Dict[str, Any]) -> Dict[str, Any]:
    """``entry`` over ``defaults``; ``headers`` and ``compat`` merged key by key, the entry's own winning."""
    merged = {**defaults, **entry}
    for name in ("headers", "compat"):
        if isinstance(defaults.get(name), dict) and isinstance(entry.get(name), dict):
            merged[name] = {**defaults[name], **entry[name]}
    return merged


def _catalog_overrides(
    path: Path, where: str, provider: str, defaults: Dict[str, Any], entries: List[Any]
) -> List[Tuple[str, Any]]:
    """A provider block's ``baseUrl``/``headers``/``compat`` applied to every catalog model of that
    provider the block does not list (the reference's "override a built-in provider": one line
    routes all of a provider's models through a proxy). A block with neither models nor catalog
    models to apply to is an error (a misspelt provider name must not pass silently)."""
    overrides = {k: v for k, v in defaults.items() if k in ("baseUrl", "headers", "compat")}
    if not overrides:
        return []
    from .models import catalog_models

    listed = {e.get("id") for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
    targets = [m for m in catalog_models(provider) if m.id not in listed]
    if not targets and not entries:
        raise UserModelsError(
            path,
            f"{where}: the catalog has no models of provider {provider!r} to apply "
            f'{sorted(overrides)} to; list its models under "models"',
        )
    return [(f"{where} (catalog {provider}/{m.id})", {"provider": provider, "id": m.id, **overrides}) for m in targets]


_KEY_HINT = "set the provider's environment variable, or pass api_key= or get_api_key"


def _model(path: Path, label: str, entry: Any) -> Model:
    if not isinstance(entry, dict):
        raise UserModelsError(path, f"{label} must be a JSON object, got {type(entry).__name__}")
    name = f"{label} ({entry.get('provider', '?')}/{entry.get('id', '?')})"

    def fail(message: str) -> UserModelsError:
        return UserModelsError(path, f"{name}: {message}")

    if "apiKey" in entry:
        raise fail(f"API keys do not belong in models.json; {_KEY_HINT}")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise fail(f"unknown key(s) {unknown}; allowed: {sorted(_ENTRY_KEYS)}")
    for key in ("id", "provider"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise fail(f'"{key}" is required (a non-empty string)')
    from .models import find_model

    base = find_model(entry["provider"], entry["id"])
    if base is not None:
        merged = base.to_dict()
        merged.update(entry)
        catalog = base.to_dict()
        for key in ("cost", "headers", "compat"):  # merged key by key over the catalog's
            if isinstance(entry.get(key), dict) and isinstance(catalog.get(key), dict):
                merged[key] = {**catalog[key], **entry[key]}
        entry = merged
    elif not isinstance(entry.get("api"), str) or not entry["api"].strip():
        raise fail('"api" is required for a model that is not in the catalog (e.g. "openai-completions")')
    _check_fields(entry, fail)
    return Model.from_dict(entry)


def _check_fields(entry: Dict[str, Any], fail: Callable[[str], UserModelsError]) -> None:
    for key in _STRINGS:
        if key in entry and not isinstance(entry[key], str):
            raise fail(f'"{key}" must be a string, got {entry[key]!r}')
    for key in _COUNTS:
        value = entry.get(key)
        if key in entry and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise fail(f'"{key}" must be a positive integer, got {value!r}')
    if "reasoning" in entry and not isinstance(entry["reasoning"], bool):
        raise fail(f'"reasoning" must be true or false, got {entry["reasoning"]!r}')
    kinds = entry.get("input", ["text"])
    if not isinstance(kinds, list) or not kinds or not all(isinstance(k, str) and k in _INPUTS for k in kinds):
        raise fail(f'"input" must be a list of "text" and "image", got {kinds!r}')
    cost = entry.get("cost", {})
    if not isinstance(cost, dict):
        raise fail(f'"cost" must be an object of prices (USD per million tokens), got {cost!r}')
    for price, value in cost.items():
        if price not in _PRICES:
            raise fail(f'"cost" has unknown price {price!r}; allowed: {list(_PRICES)}')
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise fail(f'"cost.{price}" must be a finite number >= 0, got {value!r}')
    for key in _MAPPINGS:
        if entry.get(key) is not None and not isinstance(entry[key], dict):
            raise fail(f'"{key}" must be an object, got {type(entry[key]).__name__}')  # never echo headers
    for header, value in (entry.get("headers") or {}).items():
        if not isinstance(value, str):
            raise fail(f'header "{header}" must be a string')
        problem = header_problem(header, value)  # names the header, never shows the value
        if problem:
            raise fail(problem)
    for level, value in (entry.get("thinkingLevelMap") or {}).items():
        if level not in _LEVELS:
            raise fail(f'"thinkingLevelMap" has unknown level {level!r}; allowed: {list(_LEVELS)}')
        if value is not None and not isinstance(value, str):
            raise fail(f'"thinkingLevelMap.{level}" must be a string or null, got {value!r}')


@hookimpl
def register_models(register: Callable[[Any], None]) -> None:
    """Register the models of the user's file (see the module docstring); raises
    :class:`UserModelsError` for a malformed file, before registering any of them."""
    for model in load_user_models():
        register(model)
