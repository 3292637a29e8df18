"""Did-you-mean for model names typed at the command line (``--model``, chat's ``/model``).

:func:`close_model_names` suggests catalog models (``provider/id``) and aliases for a mistyped
name: close spellings of the full key or of the bare id (``gpt-4o-mnii`` finds
``openai/gpt-4o-mini``), else the names containing what was typed (``sonnet`` finds the Claude
Sonnet models). Only ``local/ID`` or ``--base-url`` make a model the catalog does not know; with
``--base-url`` an id within a typo of a catalog id (:func:`typos_of`) is still sent as given (a
server may really serve that name), but :func:`uncatalogued_notice` says so instead of staying
silent.
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, List, Optional

__all__ = ["close_model_names", "alias_names", "did_you_mean", "typos_of", "uncatalogued_notice"]

_CUTOFF = 0.6  # difflib ratio; lower cut-offs suggest unrelated models of the 650 in the catalog
_TYPO = 0.85  # the ratio of a one- or two-character slip in a typical model id


def alias_names() -> List[str]:
    """The names of the user's model aliases (``agentcore aliases``), [] when there are none.

    A broken aliases file only means no suggestions (using an alias reports it)."""
    from ._aliases import load_aliases

    try:
        table = load_aliases()
    except Exception:  # noqa: BLE001 - suggestions are a courtesy; the lookup itself reports errors
        return []
    return sorted(str(name) for name in (table or {}))


def close_model_names(ref: str, n: int = 3) -> List[str]:
    """Up to ``n`` model keys or aliases close to ``ref`` (best first); [] when none is close."""
    from ..plugins import models

    catalog = models()
    by_id: Dict[str, List[str]] = {}
    for model in catalog:
        by_id.setdefault(str(model.id).lower(), []).append(model.key)
    names = [m.key for m in catalog] + alias_names()
    wanted = ref.strip().lower()
    head, _, tail = wanted.partition("/")
    bare = tail if tail and head in {str(m.provider).lower() for m in catalog} else wanted  # the id part
    lowered = {name.lower(): name for name in names}
    scored: List[str] = []
    for match in difflib.get_close_matches(wanted, list(lowered), n=n, cutoff=_CUTOFF):
        scored.append(lowered[match])
    for match in difflib.get_close_matches(bare, list(by_id), n=n, cutoff=_CUTOFF):
        scored.extend(by_id[match])
    if not scored and len(wanted) >= 3:  # a fragment: the names that contain it, shortest first
        scored = sorted((name for name in names if wanted in name.lower()), key=lambda k: (len(k), k))
    ranked = sorted(
        dict.fromkeys(scored),
        key=lambda k: (
            -max(
                difflib.SequenceMatcher(None, wanted, k.lower()).ratio(),
                difflib.SequenceMatcher(None, bare, k.lower().rsplit("/", 1)[-1]).ratio(),
            ),
            len(k),  # one id under several providers: the shortest key, its maker's, first
            k,
        ),
    )
    return ranked[:n]


def typos_of(ref: str, n: int = 3) -> List[str]:
    """Catalog keys whose key or bare id is within a typo of ``ref`` (difflib ratio >= 0.85: a
    swapped, missing or extra character or two), best first. Local servers' own names, such as
    ``llama3`` next to the catalog's ``llama3.1-8b``, are further away and not flagged."""
    from ..plugins import models

    wanted = ref.strip().lower()
    scored = []
    for model in models():
        ratio = max(
            difflib.SequenceMatcher(None, wanted, str(model.id).lower()).ratio(),
            difflib.SequenceMatcher(None, wanted, model.key.lower()).ratio(),
        )
        if ratio >= _TYPO and wanted not in (str(model.id).lower(), model.key.lower()):
            scored.append((-ratio, len(model.key), model.key))  # shortest key first on ties
    return [key for _, _, key in sorted(scored)[:n]]


def did_you_mean(close: List[str]) -> str:
    """`` (did you mean 'a' or 'b'?)``, or "" without suggestions."""
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)" if close else ""


def uncatalogued_notice(ref: Optional[str], model: Any) -> Optional[str]:
    """A notice when ``--base-url`` made a local model of ``ref``, an id that looks like a typo of
    a catalog model; None otherwise (``local/ID`` says the user meant it, a model resumed from a
    session was chosen earlier: no ``ref``; a catalog id itself, ``gpt-4o-mini`` which several
    providers list, is the server's model as documented, not a typo). The server's URL is shown
    without its secrets (:func:`~agentcore._safe.redact_url`)."""
    if not ref or getattr(model, "provider", None) != "local" or ref.startswith("local/"):
        return None
    from ..plugins import models

    wanted = ref.strip().lower()
    if any(str(m.id).lower() == wanted for m in models()):
        return None
    close = typos_of(ref)
    if not close:
        return None
    from .._safe import redact_url

    return (  # the URL without a proxy's user:password@ or ?key=
        f"[model {ref!r} is not in the catalog: sent to {redact_url(model.base_url)} as given{did_you_mean(close)}; "
        f"write local/{ref} to silence this]"
    )
