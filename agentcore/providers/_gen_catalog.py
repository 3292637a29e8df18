"""Regenerate ``agentcore/data/models.json`` from a model-facts file.

    python -m agentcore.providers._gen_catalog [SOURCE] [DEST]

SOURCE defaults to ``../shared/data/models.json`` next to the repository, DEST to the package's
``data/models.json``. Only models whose wire API agentcore ships a provider for are kept (the
others could not be called); entries are normalised through :class:`~agentcore.types.Model` and
sorted by ``provider/id``, one model per line so diffs stay readable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

SUPPORTED_APIS = ("openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai")
_PACKAGE = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = _PACKAGE.parents[1] / "shared" / "data" / "models.json"
DEFAULT_DEST = _PACKAGE / "data" / "models.json"


def build_catalog(source: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The normalised, filtered and sorted model dicts of a facts document."""
    from agentcore.types import Model

    entries = source["models"] if isinstance(source, dict) else source
    models = []
    for entry in entries:
        if entry.get("api") not in SUPPORTED_APIS:
            continue
        model = Model.from_dict(entry)
        models.append(model.to_dict())
    models.sort(key=lambda m: (m["provider"], m["id"]))
    return models


def render(models: List[Dict[str, Any]], source_name: str) -> str:
    lines = [json.dumps(m, ensure_ascii=False, sort_keys=False) for m in models]
    head = json.dumps({"generatedFrom": source_name, "apis": list(SUPPORTED_APIS)})[:-1]
    return head + ', "models": [\n' + ",\n".join(lines) + "\n]}\n"


def main(argv: List[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    dest = Path(argv[1]) if len(argv) > 1 else DEFAULT_DEST
    models = build_catalog(json.loads(source.read_text(encoding="utf-8")))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(render(models, "shared/data/models.json"), encoding="utf-8")
    print(f"wrote {len(models)} models to {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
