"""Agents as recipes: :class:`AgentSpec` and :class:`AgentTask`, data that can travel to a worker.

A spec names everything instead of holding it: the model as ``"provider/id"`` or a
:class:`~agentcore.types.Model` (never a key), tools by registry name or importable path
``"package.module:attr"`` (a module-level ``@tool``: the decorated object is not the module's
function, so :mod:`pickle` cannot carry it by reference) or as a tool object the standard
:mod:`pickle` can carry, plugins by entry-point name or ``"package.module:attr"``. A worker process rebuilds the agent
with :meth:`AgentSpec.build`, resolving keys from *its* environment (or the spec's picklable
``get_api_key``), and tools and plugins from *its* installed packages.

:func:`check_portable` is what ``run_many`` calls at submission: it pickles each field with the
standard :mod:`pickle` (stricter than Dask's cloudpickle on purpose: a lambda that cloudpickle
would carry may capture state that does not exist on the worker) and raises
:exc:`~agentcore.many.SpecNotPortableError` naming the first field that cannot travel.
"""

from __future__ import annotations

import copy
import importlib
import pickle
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Union

from .options import StreamOptions, installed_provider_options, split_names

__all__ = ["AgentSpec", "AgentTask", "SpecNotPortableError", "check_portable", "resolve_plugin"]


class SpecNotPortableError(TypeError):
    """A spec or task cannot travel to a worker; ``field`` names the offending field
    (``"tools[1]"``, ``"options.on_payload"``, ``"plugins[0]"``...)."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"AgentSpec.{field_name} cannot be sent to a worker: {problem}")
        self.field = field_name

    def __reduce__(self) -> Any:  # picklable with its field (a plain TypeError would lose it)
        return (_rebuild_not_portable, (self.field, str(self)))


def _rebuild_not_portable(field_name: str, message: str) -> SpecNotPortableError:
    error = SpecNotPortableError.__new__(SpecNotPortableError)
    TypeError.__init__(error, message)
    error.field = field_name
    return error


@dataclass(frozen=True)
class AgentSpec:
    """A picklable recipe for an :class:`~agentcore.agent.Agent`.

    ``model``: ``"provider/id"`` (looked up in the worker's model registry) or a ``Model``.
    ``system_prompt``: a str (or None); anything else is a ``TypeError``. ``tools``: registry
    names (``"read"``, ``"bash"``, a plugin's tool), importable paths
    ``"package.module:attr"`` (a module-level ``@tool``), or tool objects that the standard
    :mod:`pickle` can carry. ``options``: a :class:`~agentcore.options.StreamOptions` or a mapping of
    its field names (checked now: an unknown name is a ``TypeError`` with a did-you-mean).
    ``plugins``: entry-point names or ``"package.module:attr"`` paths, loaded on the worker.
    ``get_api_key``: optional ``provider -> key`` callable, picklable (a module-level function); by
    default the worker's environment supplies keys (``OPENAI_API_KEY``...).

    A key in the spec is refused: ``Authorization``-like headers in ``model.headers`` or
    ``options.headers`` raise :exc:`~agentcore.many.SpecNotPortableError` at construction. The
    repr shows options as a ``StreamOptions`` does, whether given as one or as a mapping: never
    the headers, credential-like option names (``credentials``...) as ``***``.
    """

    model: Any
    system_prompt: str = ""
    tools: Tuple[Any, ...] = ()
    thinking_level: str = "off"
    options: Optional[Union[StreamOptions, Mapping[str, Any]]] = None
    plugins: Tuple[str, ...] = ()
    get_api_key: Optional[Callable[[str], Optional[str]]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.tools, (str, Mapping)) or isinstance(self.plugins, (str, Mapping)):
            raise TypeError("AgentSpec.tools and AgentSpec.plugins must be sequences, not one name")
        object.__setattr__(self, "tools", tuple(self.tools or ()))
        object.__setattr__(self, "plugins", tuple(self.plugins or ()))
        if not isinstance(self.model, str) and not hasattr(self.model, "api"):
            raise TypeError(f'AgentSpec.model must be "provider/id" or a Model, not {type(self.model).__name__}')
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            # checked here: on the worker it fails every task, deep inside the provider's request
            hint = " (tools go in tools=...)" if isinstance(self.system_prompt, (list, tuple)) else ""
            raise TypeError(f"AgentSpec.system_prompt must be a str, not {type(self.system_prompt).__name__}{hint}")
        for index, plugin in enumerate(self.plugins):
            if not isinstance(plugin, str) or not plugin:
                given = "an empty name" if isinstance(plugin, str) else f"a {type(plugin).__name__}"
                raise SpecNotPortableError(
                    f"plugins[{index}]", f'name plugins by entry-point name or "package.module:attr", not {given}'
                )
        if self.options is not None and not isinstance(self.options, StreamOptions):
            if not isinstance(self.options, Mapping):
                raise TypeError(
                    f"AgentSpec.options must be a StreamOptions or a mapping, not {type(self.options).__name__}"
                )
            split_names(self.options, "AgentSpec.options", installed_provider_options)
            object.__setattr__(self, "options", dict(self.options))
        self._refuse_keys()

    def __repr__(self) -> str:
        # options given as a mapping are shown as a StreamOptions shows itself: never the headers
        # (a header may carry a token the refusal above does not know), credential-like names
        # masked; a spec's repr ends up in TaskResult reprs, logs and tracebacks
        return (
            f"AgentSpec(model={self.model!r}, system_prompt={self.system_prompt!r}, tools={self.tools!r}, "
            f"thinking_level={self.thinking_level!r}, options={_options_repr(self.options)}, "
            f"plugins={self.plugins!r})"
        )

    def _refuse_keys(self) -> None:
        # credential headers (the providers' own list: gateway headers included) never travel in a
        # spec; keys are resolved on the worker
        from .providers.failures import is_secret_header

        model_headers = getattr(self.model, "headers", None) or {}
        option_headers = _option(self.options, "headers") or {}
        for where, headers in (("model.headers", model_headers), ("options.headers", option_headers)):
            for name in headers:
                if is_secret_header(name):
                    raise SpecNotPortableError(
                        where,
                        f"header {name!r} carries a credential; keys are "
                        "resolved on the worker (its environment, or get_api_key)",
                    )

    def option_kwargs(self) -> Dict[str, Any]:
        """The set stream options as keyword arguments for ``Agent``."""
        from .options import option_kwargs

        return option_kwargs(self.options)

    def build(self, session: Any = None) -> Any:
        """A new :class:`~agentcore.agent.Agent` from this recipe, in this process.

        ``session``: a :class:`~agentcore.session.Session` (or None) the agent resumes from and
        records into. Raises ``UnknownModelError``/``UnknownToolError`` (listing close matches) when
        this process's registry lacks the model or a tool, ``ImportError``/``LookupError`` naming the
        plugin that cannot be loaded. A tool object of the recipe is given to the agent as a
        shallow copy, as a worker process gets a copy of its own: running the agent never changes
        the recipe (a tool caches its compiled schema validator on itself, which pickle cannot
        carry, so the recipe could not be submitted again).
        """
        from .agent import Agent

        # An autoloaded entry point is in every manager already: passing it again would only cost
        # this agent a plugin manager of its own (tens of ms with many plugins installed).
        autoloaded = _autoloaded_plugins()
        plugins = [
            plugin
            for plugin in (resolve_plugin(name, index) for index, name in enumerate(self.plugins))
            if not any(plugin is obj for obj in autoloaded)
        ]
        tools = [_built_tool(item, index) for index, item in enumerate(self.tools)]
        return Agent(
            self.model,
            self.system_prompt,
            tools,
            thinking_level=self.thinking_level,
            get_api_key=self.get_api_key,
            plugins=plugins,
            session=session,
            **self.option_kwargs(),
        )


@dataclass(frozen=True)
class AgentTask:
    """One unit of work for :func:`~agentcore.many.run_many`: run ``prompt`` on an agent built from
    ``spec``. ``session``: a session URL (``jsonl:///path``, ``sqlite:///path?session=ID``,
    ``memory:``...) opened on the worker, or None. ``id``: yours, to match results (any picklable
    value); None is allowed.

    Each task made (``AgentTask(...)``, ``dataclasses.replace``) draws a random submission token
    that its pickled copies keep: the worker recognises its own earlier attempt (a scheduler
    running it again) by this token when ``id`` is None. It is not part of equality or the repr."""

    spec: AgentSpec
    prompt: str
    session: Optional[str] = None
    id: Any = None
    _token: str = field(default_factory=lambda: uuid.uuid4().hex, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        # the session URL may carry a database password (postgresql://user:secret@host/...): a
        # task's repr ends up in logs, tracebacks and TaskResult reprs, so it shows it redacted
        from .session.urls import redact_url

        session = None if self.session is None else redact_url(self.session)
        return f"AgentTask(spec={self.spec!r}, prompt={self.prompt!r}, session={session!r}, id={self.id!r})"

    def __post_init__(self) -> None:
        if not isinstance(self.spec, AgentSpec):
            raise TypeError(f"AgentTask.spec must be an AgentSpec, not {type(self.spec).__name__}")
        if not isinstance(self.prompt, str):
            raise TypeError(f"AgentTask.prompt must be a str, not {type(self.prompt).__name__}")
        if self.session is not None and not isinstance(self.session, str):
            raise TypeError(
                "AgentTask.session must be a session URL (str) so that any worker can open "
                f"it, not {type(self.session).__name__}"
            )


def _options_repr(options: Any) -> str:
    """``options`` as :class:`~agentcore.options.StreamOptions` shows them (a mapping too)."""
    if not isinstance(options, Mapping):
        return repr(options)
    from .options import _SECRET_WORDS, spread_provider_options

    spread = spread_provider_options({k: v for k, v in options.items() if v is not None and k != "headers"})
    return repr({k: "***" if _SECRET_WORDS & set(str(k).lower().split("_")) else v for k, v in spread.items()})


def _option(options: Any, name: str) -> Any:
    if options is None:
        return None
    if isinstance(options, Mapping):
        return options.get(name)
    return getattr(options, name, None)


def _fails_pickle(value: Any) -> Optional[str]:
    try:
        pickle.loads(pickle.dumps(value))
    except Exception as exc:  # pickling raises many types (PicklingError, TypeError, AttributeError)
        from ._safe import exception_message  # an object's own __reduce__ may raise anything

        return f"{type(exc).__name__}: {exception_message(exc)}"
    return None


def _parts(spec: AgentSpec) -> Iterator[Tuple[str, Any]]:
    yield "model", spec.model
    for index, item in enumerate(spec.tools):
        yield f"tools[{index}]", item
    if isinstance(spec.options, StreamOptions):
        for f in fields(StreamOptions):
            yield f"options.{f.name}", getattr(spec.options, f.name)
    elif spec.options is not None:
        for name, value in spec.options.items():
            yield f"options.{name}", value
    yield "get_api_key", spec.get_api_key
    yield "system_prompt", spec.system_prompt


def check_portable(task: AgentTask) -> None:
    """Raise :exc:`~agentcore.many.SpecNotPortableError` naming the first field of ``task`` that the standard
    :mod:`pickle` cannot carry (a lambda or local function, an open file, a lock...)."""
    for name, value in _parts(task.spec):
        problem = _fails_pickle(value)
        if problem is not None:
            hint = (
                ' (use a registered tool name, or "package.module:attr" for a module-level tool)'
                if name.startswith("tools[")
                else " (use a function defined at module level)"
                if callable(value)
                else ""
            )
            raise SpecNotPortableError(name, problem + hint)
    problem = _fails_pickle(task.id)
    if problem is not None:
        error = SpecNotPortableError("id", problem)
        error.args = (f"AgentTask.id cannot be sent to a worker: {problem}",)
        raise error


def _built_tool(item: Any, index: int) -> Any:
    """What :meth:`AgentSpec.build` gives the agent for ``tools[index]``: a registry name as is, the
    object an importable path names, a shallow copy of a tool object (see ``build``)."""
    if isinstance(item, str):
        return _import_path(item, f"tools[{index}]") if ":" in item else item
    return copy.copy(item)


def resolve_plugin(name: str, index: int = 0) -> Any:
    """The plugin object named ``name``: ``"package.module:attr"`` is imported; any other name is
    an entry point of group ``agentcore`` (already loaded unless autoloading is off, then loaded
    now). Raises ``ImportError``/``LookupError`` naming ``plugins[index]``."""
    if ":" in name:
        return _import_path(name, f"plugins[{index}]")
    from . import _plugin_loading
    from . import plugins as registry

    for rec in _plugin_loading.load_entry_points():
        if rec.name == name and rec.obj is not None:
            return rec.obj
    from ._plugin_discovery import _iter_entry_points

    for ep, dist, version in _iter_entry_points():
        if ep.name == name:
            rec = _plugin_loading.load_entry_point(ep, dist, version)
            if rec.obj is None:
                raise ImportError(f"AgentSpec.plugins[{index}] {name!r} failed to load: {rec.error}")
            return rec.obj
    raise LookupError(
        f"AgentSpec.plugins[{index}]: no entry point {name!r} in group "
        f"{registry.ENTRY_POINT_GROUP!r} is installed here; install the plugin on every "
        'worker, or name it as "package.module:attr"'
    )


def _autoloaded_plugins() -> Tuple[Any, ...]:
    from . import _plugin_loading

    return tuple(rec.obj for rec in _plugin_loading.load_entry_points() if rec.obj is not None)


def _import_path(path: str, where: str) -> Any:
    """The object at ``"package.module:attr"`` (``attr`` may be dotted); ImportError naming ``where``."""
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ImportError(f"AgentSpec.{where} {path!r} cannot be loaded here: {exc}") from exc
    return obj
