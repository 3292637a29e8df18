"""Sphinx configuration of the agentcore documentation.

Build (warnings are errors, as in CI)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

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
    (
        "py:class",
        r"(typing|collections\.abc|concurrent\.futures|types|threading|queue|enum|pathlib|os|sqlite3|io|pluggy|argparse|"
        r"requests)\..*",
    ),
    # the same, as signatures name them after shortening (``Dict[str, Any]``)
    (
        "py:class",
        r"(Any|Callable|Iterator|Iterable|Mapping|Sequence|Literal|Optional|Union|Dict|List|"
        r"Tuple|Set|FrozenSet|Type|PluginManager|Executor)",
    ),
    ("py:mod", r"pickle"),  # the standard library module, named in run_many's docs
    ("py:class", r"T"),  # the type variable of the generic EventStream
    ("py:class", r"PathLike"),  # os.PathLike, as shortened signatures name it
    # type aliases of callable and message shapes in signatures; each parameter's docstring (and
    # the guides) say what the callable receives and returns
    (
        "py:class",
        r"(agentcore\.types\.)?MessageLike|Listener|StreamFn|GetApiKey|ConvertToLlm|"
        r"TransformContextHook|BeforeToolCallHook|AfterToolCallHook|ShouldStopAfterTurnHook|"
        r"PrepareNextTurnHook",
    ),
    # private helpers that appear in a signature (a return type) but are not API
    ("py:.*", r"(agentcore(\.\w+)*\.)?_\w+(\.\w+)*"),
    # the agent's own book of waiting approvals (agent.approve()/deny()/pending_approvals are
    # its public face), named in the docstring of the Resumption it makes
    ("py:class", r"(agentcore\.approvals\.)?Approvals"),
    # the compaction engine's building blocks, named in lower-level docstrings; the documented
    # surface is Agent.compact(), the compaction hooks and the types above
    (
        "py:.*",
        r"(agentcore\.session\.compaction(_tokens)?\.)?(compact|prepare_compaction|"
        r"run_before_compaction|live_context_tokens|estimate_context_tokens|"
        r"ContextTokenCounter(\.\w+)?|ContextEstimate)",
    ),
]


def _documented_alias(app: Any, env: Any, node: Any, contnode: Any) -> Optional[Any]:
    """Resolve a reference that names a documented object by another path.

    ``agentcore.loop.BeforeToolCallContext`` (the defining module) or ``BeforeToolCallContext``
    (a bare name inside that module's docstrings) is documented as
    ``agentcore.BeforeToolCallContext``. The longest dotted suffix of the target that matches
    exactly one documented object wins; public ``agentcore.Name`` entries are preferred.
    """
    if node.get("refdomain") != "py" or node.get("reftype") == "mod":  # a module is named by its path
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


def _hook_markers(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    """Under each hookspec, the pluggy marker its combination rule corresponds to."""
    spec = getattr(obj, "agentcore_spec", None)
    if what != "function" or not isinstance(spec, dict):
        return
    marker = (
        "``@hookspec(firstresult=True)``: pluggy stops at the first non-None result"
        if spec.get("firstresult")
        else "``@hookspec``: pluggy returns every implementation's result"
    )
    lines.extend(["", f"Marker: {marker}."])


def _split_top_level(params: str) -> List[str]:
    """``a: Dict[str, int], b=1`` -> ``["a: Dict[str, int]", " b=1"]`` (commas inside brackets kept)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(params):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    parts.append(params[start:])
    return parts


_QUALIFIED = re.compile(r"~(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)")
_REPR_DEFAULT = re.compile(r"<[^<>]*>")  # <factory>, <object object at 0x...>


def _tidy_signature(
    app: Any, what: str, name: str, obj: Any, options: Any, signature: Optional[str], return_annotation: Optional[str]
) -> Optional[Tuple[str, Optional[str]]]:
    """Make signatures readable and parseable.

    ``_name`` parameters (dataclass bookkeeping fields such as ``_absent``) are left out;
    ``~typing.Any`` becomes ``Any`` (inside a subscript, ``Dict[str, ~typing.Any]``, Sphinx would
    print the tilde); a default shown by its repr (``<factory>`` of a dataclass field) becomes
    ``...``, since Sphinx cannot parse it and would then split ``Dict[str, Any]`` at its comma.
    """
    if not signature:
        return None
    kept = [p for p in _split_top_level(signature[1:-1]) if not p.strip().startswith("_")]
    signature = _REPR_DEFAULT.sub("...", _QUALIFIED.sub(r"\1", "(" + ",".join(kept).strip() + ")"))
    return signature, _QUALIFIED.sub(r"\1", return_annotation) if return_annotation else return_annotation


def setup(app: Any) -> None:
    app.connect("missing-reference", _documented_alias)
    app.connect("autodoc-process-docstring", _hook_markers)
    app.connect("autodoc-process-signature", _tidy_signature)
