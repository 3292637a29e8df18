"""Regenerate ``agentcore/data/models.json`` from the reference's model-facts file.

    python -m agentcore.providers._gen_catalog [SOURCE] [DEST]

SOURCE defaults to ``../shared/data/models-pi-0.73.1.json`` next to the repository (the facts of
the reference's catalog, pi 0.73.1: ids, APIs, base URLs, prices, context windows,
``thinkingLevelMap``), DEST to the package's ``data/models.json``. What is kept:

* every model whose wire API the core speaks (:data:`SUPPORTED_APIS`);
* Mistral's models (api ``mistral-conversations`` in the reference), as ``openai-completions``
  models on Mistral's OpenAI-compatible endpoint (``<baseUrl>/v1``), which is how the core speaks
  to Mistral (:data:`API_REWRITES`);
* not the plugins' APIs: ``bedrock-converse-stream`` models ship in ``agentcore-bedrock``
  (``python -m agentcore_bedrock.models``), ``google-vertex`` ones in ``agentcore-vertex``
  (``python -m agentcore_vertex._gen_models``), from the same facts file; nor APIs nobody
  implements (``openai-codex-responses``: OAuth-only).

Entries are normalised through :class:`~agentcore.types.Model` (keys the type does not know, such
as ``thinkingLevelMap``, are kept verbatim) and sorted by ``provider/id``, one model per line so
diffs stay readable. ``tests/test_providers_models.py`` checks that the shipped file is this
script's output for the facts file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

SUPPORTED_APIS = (
    "openai-completions",
    "openai-responses",
    "anthropic-messages",
    "google-generative-ai",
    "azure-openai-responses",
)
#: reference api -> (the api the core speaks it with, base-URL suffix added when missing)
API_REWRITES: Dict[str, Tuple[str, str]] = {"mistral-conversations": ("openai-completions", "/v1")}
SOURCE_NAME = "models-pi-0.73.1.json"
_PACKAGE = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = _PACKAGE.parents[1] / "shared" / "data" / SOURCE_NAME
DEFAULT_DEST = _PACKAGE / "data" / "models.json"


def _rewrite(entry: Dict[str, Any]) -> Dict[str, Any]:
    api, suffix = API_REWRITES[entry["api"]]
    base_url = str(entry.get("baseUrl") or "").rstrip("/")
    if not base_url.endswith(suffix):
        base_url += suffix
    return dict(entry, api=api, baseUrl=base_url)


def build_catalog(source: Any) -> List[Dict[str, Any]]:
    """The normalised, filtered and sorted model dicts of a facts document."""
    from agentcore.types import Model

    entries = source["models"] if isinstance(source, dict) else source
    models = []
    for entry in entries:
        if entry.get("api") in API_REWRITES:
            entry = _rewrite(entry)
        if entry.get("api") not in SUPPORTED_APIS:
            continue
        models.append(Model.from_dict(entry).to_dict())
    models.sort(key=lambda m: (m["provider"], m["id"]))
    return models


def render(models: List[Dict[str, Any]], source_name: str) -> str:
    """The catalog file: a header naming the source and APIs, then one model per line."""
    lines = [json.dumps(m, ensure_ascii=False, sort_keys=False) for m in models]
    head = json.dumps({"generatedFrom": source_name, "apis": list(SUPPORTED_APIS)})[:-1]
    return head + ', "models": [\n' + ",\n".join(lines) + "\n]}\n"


def main(argv: List[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    dest = Path(argv[1]) if len(argv) > 1 else DEFAULT_DEST
    models = build_catalog(json.loads(source.read_text(encoding="utf-8")))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(render(models, source.name), encoding="utf-8")
    print(f"wrote {len(models)} models to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
