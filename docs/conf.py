"""Sphinx configuration of the agentcore documentation.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's agentcore, installed or not

import agentcore  # noqa: E402  (needs the path above)

# ---------------------------------------------------------------------------- project
_metadata = configparser.ConfigParser()
_metadata.read(ROOT / "setup.cfg", encoding="utf-8")
project = "agentcore"
author = "The agentcore developers"
copyright = "2026, The agentcore developers"
release = _metadata["metadata"]["version"]  # setup.cfg is the one source of the version
version = release

# ---------------------------------------------------------------------------- general
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
exclude_patterns = ["_build"]
nitpicky = True  # every cross-reference must resolve; the exceptions are listed below
default_role = "code"
pygments_style = "sphinx"
pygments_dark_style = "monokai"

# ---------------------------------------------------------------------------- autodoc
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"


napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# ---------------------------------------------------------------------------- HTML
html_theme = "furo"
html_title = f"agentcore {release}"
html_static_path: list = []

# ---------------------------------------------------------------------------- references
# The public names live in submodules but are documented where users import them: as
# ``agentcore.Name``. Docstrings and annotations may still name the defining module
# (``agentcore.loop.BeforeToolCallContext``); such a reference is sent to the public entry.
_PUBLIC = set(agentcore.__all__)

# Types from the standard library and third-party packages that the docs do not document
# (no intersphinx: the build runs offline). Each appears in signatures only.
nitpick_ignore_regex = [
    ("py:class", r"(typing|typing_extensions|collections\.abc|types|threading|queue|asyncio|enum|pathlib|os|concurrent\.futures|sqlite3|io)\..*"),
    ("py:class", r"pluggy\..*"),
    ("py:class", r"requests\..*"),
    ("py:class", r"(Any|Callable|Iterator|Iterable|Mapping|Sequence|Literal|Optional|Union|TypeVar|Generic|Protocol|Awaitable|Coroutine|Dict|List|Tuple|Set|FrozenSet|Type)"),
    ("py:obj", r"typing\..*"),  # how Sphinx names a stringified Dict[str, Any] annotation
    ("py:class", r"(agentcore\.streams\.)?(T|R)"),  # type variables of the generic streams
    # private helpers that appear in a signature (a return type) but are not API
    ("py:.*", r"(agentcore(\.\w+)*\.)?_\w+"),
    # the compaction engine's building blocks, named in lower-level docstrings; the documented
    # surface is Agent.compact(), the compaction hooks and the types above
    ("py:.*", r"(agentcore\.session\.compaction(_tokens)?\.)?(compact|prepare_compaction|"
              r"run_before_compaction|live_context_tokens|estimate_context_tokens|"
              r"ContextTokenCounter(\.\w+)?|ContextEstimate)"),
]


def _documented_alias(app: Any, env: Any, node: Any, contnode: Any) -> Optional[Any]:
    """Resolve a reference that names a documented object by another path.

    ``agentcore.loop.BeforeToolCallContext`` (the defining module) or ``BeforeToolCallContext``
    (a bare name inside that module's docstrings) is documented as
    ``agentcore.BeforeToolCallContext``. The longest dotted suffix of the target that matches
    exactly one documented object wins; public ``agentcore.Name`` entries are preferred.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    objects = domain.objects
    parts = node.get("reftarget", "").lstrip("~.").split(".")
    for start in range(len(parts)):
        suffix = ".".join(parts[start:])
        if start and f"agentcore.{suffix}" in objects:  # agentcore.providers.stream -> agentcore.stream
            found = [f"agentcore.{suffix}"]
        else:
            found = sorted(name for name in objects if name == suffix or name.endswith("." + suffix))
        public = [name for name in found if name.split(".")[1:2] and name.split(".")[1] in _PUBLIC]
        if len(public) == 1:
            found = public
        if len(found) == 1:  # the "obj" role matches an object of any type
            return domain.resolve_xref(env, node.get("refdoc"), app.builder, "obj", found[0], node, contnode)
        if found:
            return None  # ambiguous: let Sphinx warn
    return None


def setup(app: Any) -> None:
    app.connect("missing-reference", _documented_alias)
