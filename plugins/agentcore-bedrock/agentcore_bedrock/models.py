"""The Amazon Bedrock model catalog shipped with the plugin (``models.json``, reference JSON shape).

Regenerate it from a model-facts file with ``python -m agentcore_bedrock.models [SOURCE]``
(SOURCE defaults to ``../shared/data/models-pi-0.73.1.json`` beside the repository): every
entry whose api is ``bedrock-converse-stream`` is kept, sorted by id, one per line. The parsed
models are cached once per process (:data:`_models`); copy one before changing it, e.g.
``dataclasses.replace(model, base_url=...)``.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

from agentcore.types import Model

__all__ = ["bedrock_models", "CATALOG_PATH"]

CATALOG_PATH = Path(__file__).with_name("models.json")
_API = "bedrock-converse-stream"
_models: Optional[List[Model]] = None
_lock = threading.Lock()


def bedrock_models() -> List[Model]:
    """The catalog's models (the same objects on every call)."""
    global _models
    with _lock:
        if _models is None:
            data = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
            _models = [Model.from_dict(entry) for entry in data["models"]]
        return _models


def _render(entries: List[Dict[str, Any]], source: str) -> str:
    kept = sorted((e for e in entries if e.get("api") == _API), key=lambda e: e["id"])
    lines = ",\n".join(json.dumps(e, ensure_ascii=False) for e in kept)
    return json.dumps({"generatedFrom": source})[:-1] + ', "models": [\n' + lines + "\n]}\n"


def main(argv: List[str]) -> int:
    default = Path(__file__).resolve().parents[4] / "shared" / "data" / "models-pi-0.73.1.json"
    source = Path(argv[0]) if argv else default
    facts = json.loads(source.read_text(encoding="utf-8"))
    CATALOG_PATH.write_text(
        _render(facts["models"] if isinstance(facts, dict) else facts, source.name), encoding="utf-8"
    )
    print(f"wrote {CATALOG_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
