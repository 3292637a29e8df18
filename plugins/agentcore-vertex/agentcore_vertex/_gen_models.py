"""Regenerate ``agentcore_vertex/data/models.json`` from the reference's model-facts file.

    python -m agentcore_vertex._gen_models [SOURCE]

SOURCE defaults to ``shared/data/models-pi-0.73.1.json`` next to the repository. Only the models of
api ``google-vertex`` are kept, normalised through :class:`~agentcore.types.Model` and sorted by id,
one model per line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

API = "google-vertex"
_PACKAGE = Path(__file__).resolve().parent
DEFAULT_SOURCE = _PACKAGE.parents[3] / "shared" / "data" / "models-pi-0.73.1.json"
DEST = _PACKAGE / "data" / "models.json"


def vertex_entries(source: Any) -> List[Dict[str, Any]]:
    from agentcore.types import Model

    entries = source["models"] if isinstance(source, dict) else source
    models = [Model.from_dict(e).to_dict() for e in entries if e.get("api") == API]
    return sorted(models, key=lambda m: m["id"])


def main(argv: List[str]) -> int:
    source = Path(argv[0]) if argv else DEFAULT_SOURCE
    models = vertex_entries(json.loads(source.read_text(encoding="utf-8")))
    lines = ",\n".join(json.dumps(m, ensure_ascii=False) for m in models)
    DEST.parent.mkdir(parents=True, exist_ok=True)
    DEST.write_text(
        json.dumps({"generatedFrom": source.name, "api": API})[:-1] + ', "models": [\n' + lines + "\n]}\n",
        encoding="utf-8",
    )
    print(f"wrote {len(models)} models to {DEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
