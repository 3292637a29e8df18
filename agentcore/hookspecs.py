"""Every pluggy hook of agentcore (project name ``"agentcore"``).

A plugin is any object or module with functions marked ``@hookimpl``; third-party packages declare
them under the ``agentcore`` entry-point group. Each docstring states when the hook is called (and
on which thread), its arguments, what a return value means and how several implementations combine.

*Call order* means pluggy's: the plugin registered last is called first (``tryfirst``/``trylast``
move an implementation to the front/back). Registration order is: built-ins, then entry-point
plugins (by distribution name, then entry-point name), then the agent's own plugins (``Agent(plugins=...)``, its constructor callables, then
anything added with ``agent.plugins.register``). An implementation may accept only some of the
arguments.

The markers are the rules: agentcore calls every hook as one plain ``pm.hook.X(...)`` call and acts
on its answer (see :class:`agentcore.plugins.AgentHooks`), so a third party calling
``agent.plugins.hook.X(...)`` gets what the agent acts on. ``firstresult`` hooks stop at the first
non-None result; the others return the list of non-None results in call order. Hook wrappers
(``@hookimpl(wrapper=True)``, and old-style ``hookwrapper=True``) work on every hook that is called
through pluggy (all but the four ``register_*`` hooks, whose implementations the registries call
one by one to record which plugin registered what, and the two CLI hooks ``add_cli_options`` and
``cli_tools``, called one by one so that a failing plugin cannot break the others). An ``async def`` implementation's coroutine
is its (non-None) result; agentcore runs it to completion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional, Union

import pluggy

if TYPE_CHECKING:  # types of the hook arguments; no import at run time
    import argparse

    from .agent import Agent
    from .events import AgentEvent
    from .loop import AfterToolCallContext, AfterToolCallResult, BeforeToolCallContext, BeforeToolCallResult
    from .session.branch_summary import TreeDecision, TreePreparation
    from .session.compaction import CompactionDecision, CompactionPreparation
    from .signals import AbortSignal
    from .tools import AgentTool
    from .types import Model

__all__ = ["hookspec", "hookimpl", "PROJECT_NAME"]

PROJECT_NAME = "agentcore"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(firstresult=True)
def before_tool_call(
    context: BeforeToolCallContext,
    signal: AbortSignal,
) -> Union[BeforeToolCallResult, Mapping[str, Any], None]:
    """Inspect, rewrite or block one tool call after its arguments were validated.

    When: on the run thread, once per tool call of an assistant message, in source order, after
    argument validation and before the call executes (also before a parallel batch starts).
    ``context`` is a :class:`~agentcore.loop.BeforeToolCallContext` (``assistant_message``,
    ``tool_call``, ``args`` — the validated copy the tool will receive, so mutating it changes what
    executes — and ``context``, the run's current ``AgentContext``). ``signal`` is the run's
    :class:`~agentcore.signals.AbortSignal`.

    Return: None to have no say (the call runs unless a later implementation blocks it), or a
    verdict: a :class:`~agentcore.loop.BeforeToolCallResult` (or a dict with its keys) with
    ``block=True`` (and optionally ``reason`` and ``terminate``) to skip the call with an error
    result, or with ``block=False`` to let it run with no further say.

    Combination: first result wins (``firstresult``): implementations are called in call order
    until one returns a verdict; later ones are not called. An Agent's ``before_tool_call=``
    callable is adapted so that a result that does not block counts as None. An exception becomes
    an error tool result for that call; the batch continues. So does a result of another type
    (``True``, a string): it ended the chain before the later implementations had their say, so
    the call does not run and the error names the hook and the plugins implementing it. A dict
    with a key that is none of ``block``, ``reason`` and ``terminate`` (a misspelt ``"blocked"``)
    is refused the same way, also from an Agent's callable: taken as "no verdict", it would run
    the call it meant to block.
    """


@hookspec
def after_tool_call(
    context: AfterToolCallContext,
    signal: AbortSignal,
) -> Union[AfterToolCallResult, Mapping[str, Any], None]:
    """Override fields of one executed tool call's result.

    When: on the run thread after the tool's ``execute`` settled (in completion order for parallel
    batches), before ``tool_execution_end``; not for calls that were blocked, unknown or invalid.
    ``context`` is an :class:`~agentcore.loop.AfterToolCallContext` (``assistant_message``,
    ``tool_call``, ``args``, ``result``, ``is_error``, ``context``) holding the executed result;
    ``signal`` the run's signal. Never mutate it.

    Return: an :class:`~agentcore.loop.AfterToolCallResult` (or a dict with its keys) whose fields
    that are not None (``content``, ``details``, ``usage``, ``terminate``, ``is_error``) replace
    the corresponding field of the result (no deep merge; None cannot clear a field), or None to
    keep the result.

    Combination: every implementation is called with the same ``context``; pluggy returns their
    non-None overrides in call order and they apply in that order, so for a field set by several
    the last one called wins (:func:`agentcore.plugins.merge_after_tool_call`). To see and change
    what the others decided, write a wrapper (``@hookimpl(wrapper=True)``: ``overrides = yield``,
    return the list to use). An exception turns the result into an error result with that
    message; the batch continues. So does an override of another type (a string, say), with an
    error naming the hook and the plugins implementing it, and a dict with a key that is none of
    the fields above (the reference's spelling ``"isError"``): ignored, it would keep the result
    the hook meant to change.
    """


@hookspec
def transform_context(messages: List[Any], signal: AbortSignal) -> Optional[List[Any]]:
    """Rewrite the conversation before it is converted for the model.

    When: on the run thread before every model request, after queued steering/follow-up messages
    were added. ``messages`` is a new list (the transcript the model is about to see, custom
    messages included) made for this request: change it in place (``messages[:] = ...``,
    ``append``, ``del``; never mutate the items). ``signal`` is the run's abort signal: honour it
    if the transformation is slow.

    Return: None. The changed list is what the model sees, for this request only (the agent's
    transcript is unchanged). A returned list (other than ``messages`` itself) fails the run with a
    TypeError saying so: it could not reach the implementations called after this one.

    Combination: every implementation is called, in call order, on the same list, so each sees the
    changes of those called before it. An Agent's ``transform_context=`` callable keeps the
    reference's shape (it returns a list, or None): its list replaces the contents in place.
    An exception fails the run (the transcript stays valid).
    """


@hookspec(firstresult=True)
def convert_to_llm(message: Any) -> Optional[Any]:
    """Convert one transcript message into what the model should see.

    When: on the run thread before every model request, once per message, after
    ``transform_context``. ``message`` is a standard message or any custom object with a ``role``.

    Return: a ``UserMessage``/``AssistantMessage``/``ToolResultMessage``/``SystemMessage`` (or a
    list of them), the sentinel :data:`agentcore.messages.DROP` to leave the message out, or None
    to let the next implementation decide.

    Combination: first result wins (``firstresult``) per message. The built-in converter is a
    wrapper (plugin ``agentcore.default_converter``) that answers for messages no implementation
    claimed: standard roles pass unchanged, agentcore's own message types become user messages,
    anything else is dropped. An Agent's ``convert_to_llm=`` callable (the reference's list-level
    converter) replaces the built-in converter in that agent's manager: the messages nobody
    claimed (a None answer) reach it unchanged, and it receives the whole list once. An exception
    fails the run, and so does an answer of another type (a string: providers would drop it
    silently), with an error naming the hook and the plugins implementing it.
    """


@hookspec
def register_tools(register: Callable[[AgentTool], None]) -> None:
    """Register tools by calling ``register(agent_tool)`` for each.

    When: when a plugin manager's tool registry is first used (``get_tool``, ``Agent(tools=[
    "name"])``, ``agentcore plugins``), on that thread, and again after a plugin was registered or
    unregistered at runtime. Keep it cheap and free of side effects. ``register`` takes an
    :class:`~agentcore.tools.AgentTool` (anything with a ``name``).

    Combination: every implementation runs, in plugin registration order. For a duplicate name,
    the tool of the plugin registered later wins (a plugin cannot replace its own earlier tool);
    :func:`agentcore.plugins.registry_entries` shows the winner. An exception is reported for that
    plugin (warning and ``plugins_info``); the tools it registered before raising are kept. So is
    registering an object that is not a tool (no non-empty ``name``, or no callable ``execute``:
    it is not registered), returning something instead of calling ``register`` (a list of tools,
    say: it is ignored) and a generator implementation (``yield``: it never runs). An ``async def``
    implementation runs to completion. The same holds for every ``register_*`` hook.
    """


@hookspec
def register_providers(register: Callable[[Any], None]) -> None:
    """Register wire-API providers by calling ``register(provider)``.

    When: as :func:`register_tools`, for the provider registry (first ``get_provider``, i.e. the
    first model request of a process). A provider has ``api`` (the wire API name, e.g.
    ``"openai-completions"``) and ``stream(model, context, **options)`` returning an iterable of
    stream events with ``result()``; it must accept and ignore unknown options. An object without a
    non-empty ``api`` or a callable ``stream`` is refused (reported as below), so it never replaces
    a working provider.

    Combination: every implementation runs, in registration order; for a duplicate ``api`` the
    later-registered plugin wins. Exceptions are reported as for :func:`register_tools`.
    """


@hookspec
def register_models(register: Callable[[Model], None]) -> None:
    """Register models by calling ``register(model)`` with :class:`~agentcore.types.Model` objects.

    When: as :func:`register_tools`, for the model registry (``get_model``, ``models()``,
    ``agentcore models``).

    Combination: every implementation runs, in registration order; for a duplicate
    ``provider/id`` the later-registered plugin wins. Exceptions are reported as for
    :func:`register_tools`.
    """


@hookspec
def register_storages(register: Callable[[Any], None]) -> None:
    """Register session-storage URL schemes by calling ``register(scheme)`` for each.

    When: as :func:`register_tools`, for the storage registry: the first
    :func:`agentcore.open_session` call of a process (and ``agentcore plugins``). ``register``
    takes an :class:`agentcore.session.urls.StorageScheme` (anything with a non-empty ``scheme``,
    e.g. ``"postgresql"``, and a callable ``open(url, *, read_only, create)`` returning a
    :class:`~agentcore.session.SessionStorage` for that URL or raising ``SessionError``/``ValueError``
    naming the problem, never echoing a password). Schemes are compared in lower case.

    Combination: every implementation runs, in registration order; for a duplicate scheme the
    later-registered plugin wins. The built-in ``jsonl``, ``sqlite`` and ``memory`` schemes are
    registered this way too (plugin ``agentcore._session_schemes``). Exceptions are reported as for
    :func:`register_tools`.
    """


@hookspec
def on_event(event: AgentEvent, agent: Agent) -> None:
    """Observe every agent event.

    When: on the run thread, for every event of a run, after the agent's own state reducer ran and
    before the agent's listeners see ``event``. ``event`` is one of the agent events of
    :mod:`agentcore.events`; ``agent`` the :class:`~agentcore.agent.Agent` (read its ``state``,
    do not start runs from here). Keep it fast: the run waits for it.

    Return: ignored.

    Combination: every implementation is called, in call order. An exception ends that pluggy
    call (as in any pluggy hook, the observers after it in call order miss that event); the agent
    logs it (logger ``agentcore.plugins``, naming the plugin that raised) and the run is unaffected. An observer that must not
    disturb the others catches its own exceptions.

    Cost: ``message_update`` comes once per streamed token, so an implementation of this hook
    makes every token pay a pluggy call (and the agent a copy of the partial message for it). An
    observer that does not need the streamed updates implements :func:`on_lifecycle_event`
    instead and costs nothing per token.
    """


@hookspec
def on_lifecycle_event(event: Any, agent: Any) -> None:
    """Observe every agent event except ``message_update`` (the per-token streaming updates).

    When: as :func:`on_event`, for the same events minus ``message_update``: ``agent_start``,
    ``turn_start``, ``message_start``, ``message_end`` (the finished message, streamed text
    included), the ``tool_execution_*`` events, ``turn_end`` and ``agent_end``; on the run thread,
    after the agent's reducer ran and after the ``on_event`` implementations, before the agent's
    listeners. Meant for tracing, metrics and logging: an agent whose only observers implement
    this hook streams without any per-token hook call or copy.

    Return: ignored.

    Combination: every implementation is called, in call order; failures are logged and never
    fatal, exactly as for :func:`on_event`. A plugin implements one of the two hooks (both would
    see every event but ``message_update`` twice).
    """


@hookspec(firstresult=True)
def summarize(
    messages: List[Any],
    previous_summary: Optional[str],
    instructions: Optional[str],
    kind: str,
    model: Model,
    signal: AbortSignal,
) -> Optional[str]:
    """Write a summary instead of the built-in summariser (compaction and branch summaries).

    When: on the thread that compacts (the run thread for automatic compaction, the caller's for
    ``agent.compact()``/``navigate_tree``), once per summary request, before any model call.
    ``messages`` is a new list of the transcript messages to summarise (custom roles included,
    never mutate the items); ``previous_summary`` the summary this one should update (None for a
    first compaction and for branch summaries); ``instructions`` the user's custom focus text or
    None; ``kind`` is ``"compaction"``, ``"turn_prefix"`` (the first part of a turn cut in two) or
    ``"branch"``; ``model`` the model the built-in summariser would use; ``signal`` an
    :class:`~agentcore.signals.AbortSignal` to honour if slow.

    Return: the summary text (agentcore still appends the ``<read-files>``/``<modified-files>``
    lists it tracked, and for branches its preamble), or None to let the built-in summariser ask
    the model.

    Combination: first result wins: implementations are called in call order until one returns
    something other than None; later ones are not called. That result is used when it is a
    non-empty string; anything else (an empty string) means the built-in summariser. An exception
    makes that summary fail with ``CompactionError("summarization_failed")``; the session is left
    unchanged.
    """


@hookspec(firstresult=True)
def before_compaction(
    preparation: CompactionPreparation,
    branch_entries: List[Any],
    custom_instructions: Optional[str],
    reason: str,
    signal: AbortSignal,
) -> Union[CompactionDecision, Mapping[str, Any], None]:
    """Cancel a compaction, or supply the whole compaction instead of the built-in summariser.

    When: on the thread that compacts (the run thread for automatic compaction, the caller's for
    ``agent.compact()``), once per compaction, after agentcore decided what to summarise and
    before any model call or ``summarize`` hook. ``preparation`` is the
    :class:`~agentcore.session.compaction.CompactionPreparation` (``first_kept_entry_id``,
    ``messages_to_summarize``, ``turn_prefix_messages``, ``is_split_turn``, ``tokens_before``,
    ``previous_summary``, ``file_ops``, ``settings``); ``branch_entries`` a new list of the
    root→leaf session entries being compacted (for an agent without a session, entries made up
    from its transcript with ids ``m0``, ``m1`` ...); ``custom_instructions`` the focus text of
    ``agent.compact(text)`` or None; ``reason`` ``"manual"``, ``"threshold"`` or ``"overflow"``
    (a context-overflow error or a recoverable ``length`` stop);
    ``signal`` an :class:`~agentcore.signals.AbortSignal` to honour if slow. Never mutate the
    arguments.

    Return: None to let the compaction proceed; a
    :class:`~agentcore.session.compaction.CompactionDecision` (or a dict with its keys) with
    ``cancel=True`` to cancel it (optional ``reason``): nothing is written, ``agent.compact()``
    raises ``CompactionError("cancelled")``, an automatic compaction is skipped (the run goes
    on; an overflowed run then fails) and listeners get a ``compaction_end`` event with
    ``cancelled=True``; or one with a non-empty ``summary`` (and optionally
    ``first_kept_entry_id``, ``tokens_before``, ``details``; the preparation's values by default)
    to supply the compaction: it is stored as given with ``fromHook`` true, no model is called,
    no file lists are appended, and its ``details`` are never used for file tracking later.

    Combination: first result wins: implementations are called in call order until one returns
    something other than None; later ones are not called. An exception, or a result of another
    type, or ``details`` that are not JSON (a set, NaN), fails that compaction with
    ``CompactionError("summarization_failed")`` (an automatic one is reported in the
    ``compaction_end`` event); the session is left unchanged.
    """


@hookspec(firstresult=True)
def before_branch_summary(
    preparation: TreePreparation,
    signal: AbortSignal,
) -> Union[TreeDecision, Mapping[str, Any], None]:
    """Cancel a tree navigation, supply its branch summary, or change its instructions or label.

    When: on the caller's thread of ``navigate_tree``/``agent.navigate_tree``, once per
    navigation that moves (not when the target is the current leaf), after the target was
    checked and the abandoned branch collected, before any summary is generated and before
    anything is written. ``preparation`` is a
    :class:`~agentcore.session.branch_summary.TreePreparation` (``target_id``, ``old_leaf_id``,
    ``common_ancestor_id``, ``entries_to_summarize`` oldest first, ``user_wants_summary``,
    ``custom_instructions``, ``replace_instructions``, ``label``); ``signal`` an
    :class:`~agentcore.signals.AbortSignal` to honour if slow. Never mutate the arguments.

    Return: None to proceed unchanged, or a
    :class:`~agentcore.session.branch_summary.TreeDecision` (or a dict with its keys):
    ``cancel=True`` stops the navigation (nothing is written; the result has ``cancelled`` and
    ``moved`` False); ``summary`` (text, or a dict with ``summary`` and ``details``) replaces the
    generated summary when one was requested and the branch is not empty: it is stored as given
    with ``fromHook`` true and no model call, and its ``details`` are never used for file
    tracking; ``custom_instructions``, ``replace_instructions`` and ``label``, when not None,
    override the caller's values.

    Combination: first result wins: implementations are called in call order until one returns
    something other than None; later ones are not called. An exception, or a result of another
    type, ``details`` that are not JSON or a ``label`` that is not a string, fails the navigation
    with ``CompactionError("summarization_failed")``; nothing is written.
    """


@hookspec
def add_cli_options(parser: argparse.ArgumentParser, command: str) -> None:
    """Add command-line options to ``agentcore run``, ``agentcore chat`` and ``agentcore rpc``.

    When: on the thread running the command (``agentcore.cli.main``) while it builds its
    parser, once per sub-command that builds an agent, whenever the command line names ``run``,
    ``chat`` or ``rpc`` (their ``--help`` included): ``command`` is ``"run"``, ``"chat"`` or
    ``"rpc"`` and ``parser`` that
    sub-command's ``argparse.ArgumentParser``. Call ``parser.add_argument(...)`` (give each
    option a ``dest`` prefixed with the plugin's name to stay clear of other plugins); read the
    values in :func:`cli_tools`. Keep it cheap (``--help`` waits for it): import what the options
    need only in :func:`cli_tools`.

    Return: ignored.

    Combination: every implementation runs, in plugin registration order, each called on its own
    (not through one pluggy call, so wrappers do not apply). An exception (an option clashing with
    an existing one, say) is reported like a broken plugin (a ``PluginLoadWarning`` naming the
    plugin) and the parser stays usable: the other plugins' options are added.
    """


@hookspec
def cli_tools(args: argparse.Namespace, command: str) -> Optional[List[AgentTool]]:
    """Supply extra tools to the agent of ``agentcore run``, ``agentcore chat`` or ``agentcore rpc``.

    When: on the thread running the command, after the command line was parsed and before it builds
    its :class:`~agentcore.agent.Agent`, once per command. ``args`` is the parsed
    ``argparse.Namespace`` (the options of :func:`add_cli_options` included; read them with
    ``getattr(args, dest, None)``: they are absent when the plugin's ``add_cli_options`` failed);
    ``command`` is ``"run"``, ``"chat"`` or ``"rpc"``. Resources the tools hold (server processes, sockets)
    are the plugin's to release at process exit.

    Return: a list of :class:`~agentcore.tools.AgentTool`, or None (nothing to add; e.g. when its
    options were not given).

    Combination: every implementation runs, in plugin registration order, each called on its own;
    the lists are concatenated in that order and appended after the ``--tools`` tools. An
    exception, or a result that is not a list of tools, stops the command with exit status 2 and
    a message naming the plugin and the problem (the agent is not built).
    """
