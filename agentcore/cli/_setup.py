"""Turning command-line options into a model, tools, a session and an :class:`~agentcore.agent.Agent`.

Every problem with the user's configuration raises :class:`UsageError`, whose text says what is
wrong and what to type instead; the command then exits with status 2. API keys are read from the
environment only (``--api-key-env NAME`` or the provider's usual variable) and never printed.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, overload

__all__ = [
    "UsageError",
    "NO_MODEL_HELP",
    "SCRIPTED",
    "LOCAL_PREFIX",
    "ScriptedDemo",
    "CliOptions",
    "resolve_model",
    "local_model",
    "resolve_tools",
    "read_api_key",
    "check_api_key",
    "check_thinking",
    "open_session",
    "default_sessions_dir",
    "build_agent",
]

#: ``--model scripted`` (or ``AGENTCORE_MODEL=scripted``) selects the offline demo model.
SCRIPTED = "scripted"
MODEL_ENV = "AGENTCORE_MODEL"
#: ``--model local/ID --base-url URL``: the prefix names the provider of a local server (stripped).
LOCAL_PREFIX = "local/"
SESSIONS_DIR_ENV = "AGENTCORE_SESSIONS_DIR"

NO_MODEL_HELP = """\
agentcore: no model configured. Choose one of:
  --model provider/id              a catalog model, e.g. --model anthropic/claude-sonnet-4-5
                                   (with ANTHROPIC_API_KEY set); `agentcore models` lists them
  AGENTCORE_MODEL=provider/id      the default model for every command
  --base-url URL --model ID        a local OpenAI-compatible server (llama.cpp, Ollama, vLLM,
                                   LM Studio), e.g. --base-url http://127.0.0.1:8080/v1 --model llama3
                                   (ID is sent as given; a local/ prefix is stripped)
  --model scripted                 the offline scripted demo (no network, no key)
An API key comes from the provider's usual variable (e.g. OPENAI_API_KEY) or --api-key-env NAME."""


class UsageError(Exception):
    """A configuration or command-line mistake; the message tells the user what to do (exit 2)."""


# --------------------------------------------------------------------------- the offline demo


class ScriptedDemo:
    """The ``--model scripted`` model: answers without network, using ``ls`` when it is offered.

    It is a :class:`~agentcore.testing.ScriptedModel` fed one computed response per request, so it
    streams word by word and honours aborts like a real provider.
    """

    def __init__(self, tokens_per_second: float = 200.0) -> None:
        from ..testing import ScriptedModel
        from ..types import Model

        model = Model(
            id="scripted-demo",
            name="Offline scripted demo",
            api="scripted",
            provider="scripted",
            base_url="",
            context_window=128000,
            max_tokens=16384,
        )
        self._scripted = ScriptedModel(tokens_per_second=tokens_per_second, model=model)
        self.model = self._scripted.model

    def stream_fn(self, model: Any, context: Any, **options: Any) -> Any:
        if self._scripted.remaining == 0:
            self._scripted.push(self._respond)
        return self._scripted.stream_fn(model, context, **options)

    @staticmethod
    def _respond(context: Any) -> Any:
        from ..testing import text, tool_call
        from ..types import role_of, text_of

        hint = (
            "(This is the offline scripted demo. For a real model use --model provider/id; "
            "`agentcore models` lists them.)"
        )
        if "summar" in (context.system_prompt or "").lower():  # a compaction or branch summary request
            return text("## Goal\nTry agentcore offline.\n\n## Progress\n(summary written by the scripted demo)")
        final = next((t for t in context.tools or () if getattr(t, "name", None) == "final_result"), None)
        if final is not None:  # run --schema: answer with a value of the asked shape
            return tool_call("final_result", _example(final.parameters))
        last = context.messages[-1] if context.messages else None
        if last is not None and role_of(last) == "toolResult":
            lines = text_of(last.content).splitlines()
            first = lines[0] if lines else ""
            return text(
                f"The {last.tool_name} tool answered with {len(lines)} line(s); the first is {first!r}.\n{hint}"
            )
        prompt = text_of(getattr(last, "content", "")) if last is not None else ""
        if any(getattr(t, "name", None) == "ls" for t in context.tools or ()):
            return tool_call("ls", {"path": "."}, text="Let me look at the working directory first.")
        return text(f"You said: {prompt}\n{hint}")


_EXAMPLES = {"string": "demo", "integer": 1, "number": 1.5, "boolean": True, "null": None}


def _example(schema: Any) -> Any:
    """A small value matching ``schema`` (the demo's answer to ``run --schema``)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _example(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: _example(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_example(schema["items"])] if isinstance(schema.get("items"), dict) else []
    return _EXAMPLES.get(str(kind))


# --------------------------------------------------------------------------- options


@dataclass
class CliOptions:
    """The options shared by ``run`` and ``chat`` (None: not given)."""

    model: Optional[str] = None
    base_url: Optional[str] = None
    api_key_env: Optional[str] = None
    tools: Optional[str] = None
    session: Optional[str] = None
    sessions_dir: Optional[str] = None
    thinking: Optional[str] = None
    system: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    option: Optional[List[Any]] = None  # -o KEY VALUE pairs, parsed by stream_options()

    @classmethod
    def from_args(cls, args: Any) -> CliOptions:
        names = ("model", "base_url", "api_key_env", "tools", "session", "sessions_dir", "thinking", "system", "option")
        given: Dict[str, Any] = {name: getattr(args, name, None) for name in names}
        return cls(**given)


def stream_options(pairs: Optional[List[Any]]) -> Dict[str, Any]:
    """The provider options of ``-o KEY VALUE`` pairs, parsed to their types and checked as
    ``Agent()`` checks them (a header name that is no HTTP token, say); UsageError naming the
    problem for an unknown key (with a did-you-mean) or a value of the wrong type. The value of a
    secret option (``headers``: it may hold an ``Authorization``) is never shown in the message."""
    from ..options import check_value, installed_provider_options, parse_cli_option

    parsed = {}
    for key, value in pairs or ():
        try:
            name, typed = parse_cli_option(key, value, installed_provider_options)
            check_value(name, typed, "-o/--option")
        except (TypeError, ValueError) as exc:  # a secret option's value is never quoted in it
            raise UsageError(str(exc)) from None
        parsed[name] = typed
    return parsed


def resolve_model(
    ref: Optional[str], base_url: Optional[str] = None, *, key_given: bool = False
) -> Tuple[Any, Optional[Callable[..., Any]]]:
    """``(model, stream_fn)`` for a ``--model`` value (``stream_fn`` is None for real providers).

    ``ref`` None falls back to ``AGENTCORE_MODEL``. With ``base_url`` a catalog model is pointed at
    that URL, and an id the catalog does not know becomes a local OpenAI-compatible model: a
    ``local/`` prefix only names that provider and is stripped (``local/llama3`` sends ``llama3``,
    ``local/openai/gpt-4o`` sends ``openai/gpt-4o`` even though the catalog knows that id); any other
    id is sent to the server verbatim (vLLM serves names like ``Qwen/Qwen2.5-7B-Instruct``). With
    ``key_given`` (``--api-key-env``) a bare id several providers list is refused, not guessed,
    whether given directly or as an alias's target. Raises :class:`UsageError` when nothing is
    configured or the model is unknown.
    """
    ref = ref or os.environ.get(MODEL_ENV) or None
    if ref is not None:
        ref = ref.strip()
    if ref:
        from ._aliases import resolve_alias

        target, alias = resolve_alias(ref)
        if alias is not None:
            try:
                return resolve_model(target, base_url, key_given=key_given)
            except UsageError as exc:
                raise UsageError(
                    f"--model {alias} is an alias for {target}: {exc} "
                    f"(change it: agentcore aliases set {alias} provider/id)"
                ) from None
    if not ref:
        if base_url:
            from .._safe import redact_url

            raise UsageError(  # the URL without a proxy's user:password@ or ?key=
                f"--base-url {redact_url(base_url)} needs --model ID: the model name the server expects "
                "(llama.cpp accepts any name; Ollama wants e.g. llama3)"
            )
        raise UsageError(NO_MODEL_HELP)
    if ref == SCRIPTED:
        demo = ScriptedDemo()
        return demo.model, demo.stream_fn
    from ..plugins import UnknownModelError, get_model, models

    if base_url and ref.startswith(LOCAL_PREFIX) and len(ref) > len(LOCAL_PREFIX):
        return local_model(ref[len(LOCAL_PREFIX) :], base_url), None
    try:
        model = copy.deepcopy(get_model(ref))
    except UnknownModelError:
        if base_url:  # a local server's model (one that serves "gpt-4o" too): no cloud key sent
            return local_model(ref, base_url), None
        offered = [m for m in models() if m.id == ref] if "/" not in ref else []
        if len(offered) > 1 and key_given:  # --api-key-env's key must never go to a guessed provider
            raise UsageError(
                f"model id {ref!r} is offered by several providers ({_providers_of(offered)}): with "
                f"--api-key-env name the one the key is for, --model PROVIDER/{ref}"
            ) from None
        if len(offered) > 1:  # a bare id of several providers: the one with credentials
            return copy.deepcopy(_configured_choice(ref, offered)), None
        raise UsageError(_unknown_model(ref)) from None
    if base_url:
        model.base_url = base_url.rstrip("/")
    return model, None


def _configured_choice(ref: str, offered: List[Any]) -> Any:
    """The model a bare ``--model`` id means when several providers list it (``gpt-4o``: openai,
    azure-openai-responses, github-copilot, ...): the one provider with a key of its own in sight
    (a variable only it reads, ``OPENAI_API_KEY`` say, or a key stored with ``agentcore keys
    set``); else the one with any credentials in sight (also ``GH_TOKEN``/``GITHUB_TOKEN``, which
    anyone using ``gh`` has set, and a cloud's credentials file or variables); else the one that
    needs no key at all; as the reference picks among the models it has credentials for.
    UsageError naming the candidates when the first tier that is not empty holds several, or all
    are empty (a cloud chain with nothing in sight, an instance role say, is not guessed)."""
    from ..providers.base import ENV_API_KEYS, get_env_api_key
    from ._keys import stored_key

    def own_key(model: Any) -> bool:
        provider = str(model.provider)
        names = ENV_API_KEYS.get(provider, ())
        if any(os.environ.get(name) for name in names if name not in _SHARED_TOKENS):
            return True
        return bool(names and stored_key(provider))

    def configured(model: Any) -> bool:
        return own_key(model) or bool(get_env_api_key(str(model.provider)))

    def keyless(model: Any) -> bool:
        return not ENV_API_KEYS.get(str(model.provider)) and not finds_own_credentials(model)

    tiers = (
        [m for m in offered if own_key(m)],
        [m for m in offered if configured(m)],
        [m for m in offered if keyless(m)],
    )
    for tier in tiers:
        if len(tier) == 1:
            return tier[0]
        if tier:
            raise UsageError(
                f"model id {ref!r} is offered by several providers you have credentials for "
                f"({_providers_of(tier)}): name the one you mean, --model PROVIDER/{ref}"
            )
    raise UsageError(
        f"model id {ref!r} is offered by several providers ({_providers_of(offered)}) and none has a "
        f"key configured: export the key of the one you mean (or store it: agentcore keys set PROVIDER), "
        f"or name it: --model PROVIDER/{ref}"
    )


#: credentials a provider reads that are not for it alone: a GitHub token is set for ``gh`` and
#: CI; with ``OPENAI_API_KEY`` also set, a bare ``gpt-4o`` means openai, not github-copilot
_SHARED_TOKENS = frozenset({"GH_TOKEN", "GITHUB_TOKEN"})


def _providers_of(offered: List[Any]) -> str:
    return ", ".join(sorted(str(m.provider) for m in offered))


def _unknown_model(ref: str) -> str:
    """The message for a ``--model`` the catalog does not know (no ``--base-url``): a did-you-mean
    over catalog ids and aliases (:mod:`agentcore.cli._names`), and how to reach a local server."""
    from ._names import close_model_names, did_you_mean

    if ref.startswith(LOCAL_PREFIX):
        return (
            f"unknown model {ref!r}: a local/ID model needs --base-url URL, the endpoint of the "
            "OpenAI-compatible server (e.g. --base-url http://127.0.0.1:8080/v1)"
        )
    return (
        f"unknown model {ref!r}{did_you_mean(close_model_names(ref))}. `agentcore models` lists them; "
        "for a model served elsewhere add --base-url URL (an OpenAI-compatible endpoint)."
    )


def local_model(model_id: str, base_url: str) -> Any:
    """The model of a local OpenAI-compatible server: ``model_id`` is sent as the model name."""
    from ..types import Model

    return Model(id=model_id, name=model_id, api="openai-completions", provider="local", base_url=base_url.rstrip("/"))


def resolve_tools(spec: Optional[str], extra: Sequence[Any] = ()) -> List[Any]:
    """The tools named in a comma list (``"read,bash"``): those of ``extra`` (chat's plugin CLI
    tools) by name first, else the registry's; ``None``/``""``/``"none"``: none. Empty items are
    skipped and a name given twice is taken once (an agent's tools need distinct names).
    UsageError with a did-you-mean for an unknown name."""
    if not spec or spec.strip().lower() == "none":
        return []
    from ..plugins import UnknownToolError, get_tool
    from ..plugins import tools as registered_tools

    offered = {getattr(t, "name", None): t for t in extra}
    tools = []
    seen = set()
    for name in (part.strip() for part in spec.split(",")):
        if not name or name in seen:
            continue
        seen.add(name)
        if name in offered:
            tools.append(offered[name])
            continue
        try:
            tools.append(get_tool(name))
        except UnknownToolError:
            known = [t.name for t in registered_tools()] + [str(n) for n in offered]
            raise UsageError(
                "--tools: "
                + _unknown(
                    "tool",
                    name,
                    known,
                    _broken_plugins_hint()
                    or "`agentcore plugins` lists the installed plugins "
                    "and their tools; install the one that provides it",
                )
            ) from None
    return tools


def _unknown(kind: str, name: str, known: List[str], hint: str) -> str:
    """``unknown KIND 'NAME' (did you mean ...?)`` plus ``hint``: the command-line wording (the
    registry's own message ends with advice for Python code, such as passing an AgentTool)."""
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if close:
        found = " (did you mean " + " or ".join(repr(c) for c in close) + "?)"
    elif kind == "tool" and known:
        found = f" (registered: {', '.join(sorted(known))})"
    else:
        found = ""
    return f"unknown {kind} {name!r}{found}. {hint}."


def _broken_plugins_hint() -> str:
    """The load errors of broken plugins (their tools are missing), or "" when none is broken."""
    import warnings

    from ..plugins import plugins_info

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the load warning was shown once already
        broken = [info for info in plugins_info() if info.error]
    if not broken:
        return ""
    lines = [f"{len(broken)} plugin(s) failed to load, so the tools they provide are missing; it may be one of theirs:"]
    for info in broken:
        origin = " ".join(part for part in (info.distribution, info.version) if part) or "?"
        error = str(info.error).replace("\n", "\n      ")
        lines.append(f"  {info.name} ({origin}, {info.entry_point or '?'}): {error}")
    lines.append("Fix or reinstall that plugin (`agentcore plugins` shows the errors), then try again")
    return "\n".join(lines)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_api_key(env_name: Optional[str]) -> Optional[str]:
    """The key in environment variable ``env_name`` (None when not asked for). Never printed.
    UsageError when ``env_name`` is given but empty (``--api-key-env "$UNSET"``: the key the user
    meant is not silently replaced by the provider's usual variable), names no set variable, or
    the key holds a line break or another control character (no provider could send it). An unset
    name that no shell could export (``--api-key-env "$OPENAI_API_KEY"`` passes the key itself) is
    refused without being quoted."""
    if env_name is None:
        return None
    if not env_name.strip():
        raise UsageError("--api-key-env needs the name of an environment variable, e.g. --api-key-env MY_OPENAI_KEY")
    value = os.environ.get(env_name, "").strip()
    if not value and not _ENV_NAME.fullmatch(env_name):
        raise UsageError(
            "--api-key-env takes the name of an environment variable (letters, digits and _), e.g. "
            "--api-key-env MY_OPENAI_KEY; the value given (not shown: it may be the key) names no set "
            'variable. Was it "$MY_OPENAI_KEY"? Give the name without the $'
        )
    if not value:
        raise UsageError(
            f"--api-key-env {env_name}: the environment variable {env_name} is not set or empty; "
            f"export it first (export {env_name}=...)"
        )
    from ..providers.base import ProviderError, clean_api_key

    try:
        return clean_api_key(value, f"--api-key-env {env_name}: the key in {env_name}")
    except ProviderError as exc:  # refused before anything is sent, naming the variable (never the key)
        raise UsageError(str(exc)) from None


def check_api_key(model: Any, api_key: Optional[str]) -> None:
    """UsageError when ``model``'s provider needs a key and neither ``--api-key-env`` nor the
    provider's usual variable gives one (the provider's own message would say ``api_key=``)."""
    if api_key:
        return
    from ..providers.base import ENV_API_KEYS, get_env_api_key

    provider = str(getattr(model, "provider", ""))
    names = ENV_API_KEYS.get(provider)
    if names and not get_env_api_key(provider) and not finds_own_credentials(model):
        also = f" (or {' or '.join(names[1:])})" if len(names) > 1 else ""
        raise UsageError(
            f'no API key for provider "{provider}": export {names[0]}=...{also}, '
            f"name another variable with --api-key-env NAME, or store one with: agentcore keys set {provider}"
        )


def finds_own_credentials(model: Any) -> bool:
    """True when the provider of ``model``'s wire API declares ``ambient_credentials = True``: it
    resolves credentials itself (a cloud's chain: a default profile, an instance role, ADC), which
    no environment check here can foresee; its own error names what is missing."""
    from ..plugins import UnknownProviderError, get_provider

    try:
        provider = get_provider(str(getattr(model, "api", "")))
    except UnknownProviderError:
        return False
    return getattr(provider, "ambient_credentials", False) is True


@overload
def check_thinking(level: str) -> str: ...


@overload
def check_thinking(level: None) -> None: ...


def check_thinking(level: Optional[str]) -> Optional[str]:
    """``level`` if it is a thinking level (``off``, ``minimal`` ... ``max``); else UsageError."""
    if level is None:
        return None
    from ..types import ThinkingLevel

    allowed = [member.value for member in ThinkingLevel]
    if level not in allowed:
        raise UsageError(f"--thinking {level!r}: choose one of {', '.join(allowed)}")
    return level


# --------------------------------------------------------------------------- sessions


def default_sessions_dir() -> str:
    """``$AGENTCORE_SESSIONS_DIR``, else ``~/.agentcore/sessions``."""
    return os.environ.get(SESSIONS_DIR_ENV) or os.path.join(os.path.expanduser("~"), ".agentcore", "sessions")


_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def is_session_path(value: str) -> bool:
    """True when ``--session`` names a file (a path separator or a session-file suffix, in any case)
    and is not a session URL (see :func:`is_session_url`)."""
    if is_session_url(value):
        return False
    return "/" in value or os.sep in value or value.lower().endswith((".jsonl",) + _SQLITE_SUFFIXES)


_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


def is_session_url(value: str) -> bool:
    """True when ``--session`` is a session URL: ``scheme:...`` for a scheme a session storage is
    registered for (``jsonl:``, ``sqlite:``, ``memory:``, a plugin's ``postgresql:``), and any
    ``scheme://...``, registered or not: opening one of an unknown scheme is an error naming the
    scheme (a DSN whose plugin is missing, ``postgresql://user:password@host/db``, is never taken
    for a relative path, which would put its password in a file name). Anything else,
    ``notes:1.jsonl`` or ``C:\\x.jsonl`` included, is a path or an id. Scans the plugins only for a
    value that starts like a URL."""
    match = _URL_SCHEME.match(value)
    if match is None:
        return False
    if value[match.end() :].startswith("//"):
        return True
    from ..plugins import default_plugin_manager

    return match.group(1).lower() in default_plugin_manager().registry("storage")


def open_session_url(value: str, *, read_only: bool = False, create: bool = True) -> Any:
    """The session a ``--session`` URL names, created when missing (``create``, and not
    ``read_only``).

    Raises ``ValueError`` (a malformed URL, an unknown query parameter) and ``SessionError``
    (``not_found`` when reading a missing session, a locked one, ...); neither message holds
    the URL's password."""
    from ..session.urls import open_session as open_url

    return open_url(value, read_only=read_only, create=create and not read_only)


def open_session(value: str, sessions_dir: Optional[str] = None) -> Any:
    """Open or create the session named by ``--session``.

    A path ending in ``.jsonl`` (or containing a separator) is a JSONL file, created when missing;
    ``.db``/``.sqlite`` is a SQLite database holding one session (created when empty). Either
    file's missing directories are created. Anything else is a session id in the sessions directory
    (``new`` makes a fresh id), opened when it exists and created for the current directory
    otherwise. Raises :class:`UsageError` naming the session, also when a file or directory cannot
    be created (a parent that is a file, a read-only directory).
    """
    from ..session import Session, SessionError, SessionLockedError
    from ..session.urls import redact_url

    shown = redact_url(value)
    try:
        if is_session_url(value):
            return open_session_url(value)
        if is_session_path(value):
            path = os.path.abspath(os.path.expanduser(value))
            if not os.path.lexists(path):
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            if os.path.isdir(path):
                raise UsageError(
                    f"--session {shown}: {path} is a directory; name a session file in it "
                    f"(--session {shlex.quote(os.path.join(path, 'NAME.jsonl'))}), or keep session ids "
                    f"there: --sessions-dir {shlex.quote(path)} --session ID"
                )
            if path.lower().endswith(_SQLITE_SUFFIXES):
                return _open_sqlite(path)
            if os.path.exists(path):
                return Session.open(path)
            return Session.create(path)
        from ..session import SessionRepository

        repo = SessionRepository(sessions_dir or default_sessions_dir())
        if value == "new":
            return repo.create()
        try:
            return repo.open(value)
        except SessionError as exc:
            if exc.code != "not_found":
                raise
            return repo.create(session_id=value)
    except SessionLockedError as exc:
        # the storage's text ends with Python advice (read_only=True): keep what it says about who
        # holds the lock, then say what a command-line user can do
        where = str(exc).split(";", 1)[0]
        raise UsageError(
            f"--session {shown}: {where}. Another agentcore chat or run (or a program) is writing "
            "this session: finish or quit it first, or start a separate one with --session new. "
            f"To read it meanwhile: agentcore sessions show {shlex.quote(shown)} (or export)"
        ) from None
    except (SessionError, ValueError) as exc:
        raise UsageError(f"--session {shown}: {_command_line_advice(exc)}") from None
    except OSError as exc:  # a directory that cannot be made: a parent that is a file, no permission
        raise UsageError(f"--session {shown}: {_os_problem(exc)}") from None


def _command_line_advice(exc: Exception) -> str:
    """The storage's message with its advice for Python code (``read_only=True``, a
    ``SessionInfo``) replaced by what a command-line user can do."""
    text = str(exc)
    if getattr(exc, "code", None) == "invalid_query" and "; give the path" in text:  # an id of several files
        return text.rsplit("; give the path", 1)[0] + "; give the path of the one you mean: --session PATH"
    return text.replace("; check permissions or open with read_only=True", "; check its permissions")


def _os_problem(exc: OSError) -> str:
    """``PATH: what is wrong`` for an OSError of opening a session (``os.makedirs`` says only
    "File exists" for a parent directory that is a file)."""
    where = f"{exc.filename}: " if exc.filename else ""
    if isinstance(exc, FileExistsError) and exc.filename and not os.path.isdir(exc.filename):
        return f"{where}not a directory, so the session cannot be created in it"
    return f"{where}{exc.strerror or exc}"


def _open_sqlite(path: str) -> Any:
    """The session of the database at ``path``; a new one when the file is missing, empty (0
    bytes, ``touch x.db``) or a database without tables."""
    from ..session import Session, SqliteSessionStorage

    if _is_empty_database(path):
        return Session(SqliteSessionStorage.create(path))
    sessions = SqliteSessionStorage.list_sessions(path)
    if not sessions:
        return Session(SqliteSessionStorage.create(path))
    if len(sessions) > 1:
        raise UsageError(several_sessions(path, [info.id for info in sessions]))
    return Session(SqliteSessionStorage(path))


def several_sessions(path: str, ids: Sequence[str]) -> str:
    """What to tell a user whose ``--session`` names a database holding several sessions."""
    import urllib.parse

    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    url = "sqlite://" + urllib.parse.quote(path) + "?session=ID"
    return f"{path} holds {len(ids)} sessions ({shown}); choose one with --session {shlex.quote(url)}"


def _is_empty_database(path: str) -> bool:
    """True for a missing or 0-byte file and a SQLite database without tables; a file SQLite
    cannot read is left to the session storage (which says what is wrong with it)."""
    import pathlib
    import sqlite3

    try:
        if os.path.getsize(path) == 0:
            return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        connection = sqlite3.connect(pathlib.Path(path).as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    except sqlite3.Error:
        return False
    finally:
        connection.close()


# --------------------------------------------------------------------------- the agent


def _session_model(
    session: Any, base_url: Optional[str], own_key: bool = False, key_provider: Optional[str] = None
) -> Optional[Tuple[Any, Optional[Callable[..., Any]]]]:
    """``(model, stream_fn)`` resuming with the session's last model, or None when it records none.

    The scripted demo is the demo again; with ``--base-url`` a local server's model keeps its id
    (sent verbatim, never looked up in the catalog by bare id) at the new URL and a catalog model is
    pointed there; otherwise the registry's model, or one rebuilt from the endpoint the session
    recorded (:func:`~agentcore.session.agent_link.session_model`) unless a key would go with it
    (``own_key``: ``--api-key-env``'s, whatever the provider; ``key_provider``: the provider an
    agent's key is for, sent to that provider's models only; or a key stored for the recorded
    provider): a session file never decides where a key is sent. UsageError when it cannot.
    """
    recorded = session.build_context().model
    if recorded is None:
        return None
    if recorded.provider == "scripted":
        return resolve_model(SCRIPTED)
    if base_url:
        if recorded.provider == "local":
            return local_model(recorded.model_id, base_url), None
        return resolve_model(recorded.key, base_url)
    from ..session.agent_link import UnresolvedModelError
    from ..session.agent_link import _session_model as resolve_recorded

    # (recorded has .provider, as a model has)
    own_key = own_key or recorded.provider == key_provider or bool(_stored_key(recorded))
    try:
        return resolve_recorded(session, recorded, None, own_key), None
    except UnresolvedModelError as exc:
        raise UsageError(
            f"--session: cannot resume with the session's model {recorded.key}: it is not in the catalog "
            f"and {exc.reason}. Pass --base-url URL (the server it ran on; --model {recorded.model_id} "
            "is then implied) or choose a model with --model provider/id."
        ) from None


@dataclass
class AgentSetup:
    """What :func:`build_agent` made: the agent, its session (or None) and the secret to redact."""

    agent: Any
    session: Any = None
    api_key: Optional[str] = None
    created_session: bool = False
    plugin_tools: List[Any] = field(default_factory=list)  # from the cli_tools hook, for chat's /tools
    key_from_option: bool = False  # --api-key-env: chat's /model keeps that key for its provider
    default_logged: bool = False  # a session created by default logging (agentcore.cli._logs)
    system: Optional[str] = None  # the --system text in effect, given or resumed (None: none)
    made: Optional[str] = None  # the file build_agent created for --session (a failed start removes it)


#: the custom entry that records ``--system`` in a session (``data``: ``{"text": ...}``), so that
#: ``-c``/``--session`` resume with it as they resume the model and the thinking level
SYSTEM_ENTRY = "agentcore.cli.system"


def recorded_system(session: Any) -> Optional[str]:
    """The ``--system`` text the session's current branch recorded last (None: none recorded).
    Reads the branch's ids and types only, decoding just its custom entries."""
    storage = session.storage
    leaf = session.leaf_id
    if leaf is None:
        return None
    for entry_id in storage.path_to_root(leaf):
        if storage.type_of(entry_id) != "custom":
            continue
        entry = storage.get_entry(entry_id)
        if getattr(entry, "custom_type", None) == SYSTEM_ENTRY:
            data = getattr(entry, "data", None)
            text = data.get("text") if isinstance(data, dict) else None
            return text if isinstance(text, str) else None
    return None


def record_system(setup: AgentSetup) -> None:
    """Before a prompt: record the ``--system`` text in effect on the session's branch unless the
    branch already ends with it (so a later ``-c`` resumes with it; a chat's ``/branch`` to an
    earlier point records it again). Nothing without a session or a ``--system``."""
    if setup.session is None or setup.system is None:
        return
    if recorded_system(setup.session) != setup.system:
        setup.session.append_custom(SYSTEM_ENTRY, {"text": setup.system})


def build_agent(options: CliOptions, args: Any = None, command: str = "run", session: Any = None) -> AgentSetup:
    """An Agent for ``run``/``chat``: model, tools, key, thinking level, system prompt, session.

    With ``args`` (the parsed command line) the tools of the plugins' ``cli_tools(args, command)``
    hook follow the ``--tools`` tools (:func:`agentcore.cli._hooks.plugin_tools`); the hook is
    called once the model and its key are found, so a mistyped ``--model`` or a missing key
    starts no plugin's servers (``--mcp``).

    With a session the agent resumes from it (``Agent(session=...)``: its messages, its thinking
    level unless ``--thinking`` is given, its last model unless ``--model`` is given, and the
    ``--system`` text it recorded unless ``--system`` is given: :func:`record_system`) and records
    every finished message. ``session`` (an open Session, e.g. the one default logging created)
    is used when ``options.session`` names none; it is closed when building fails, and a session
    file that ``--session`` created (a new path, ``new``, an id not yet recorded) is removed again,
    whatever failed (a plugin's ``cli_tools``, Ctrl-C), so a failed start leaves no empty
    session. An empty ``--session`` (``--session "$UNSET"``) is a UsageError, never a new
    conversation in place of the one meant. A ``--session`` file with a malformed entry is a
    UsageError naming the file and the line. The API key is ``--api-key-env``'s, else the
    provider's variable's, else the keys file's (:func:`agentcore.cli._keys.stored_key`). Raises
    :class:`UsageError`.
    """
    created = False
    made: Optional[str] = None  # the file this call created for --session: removed on failure
    try:
        if options.session is not None and not options.session.strip():
            # "$UNSET" expanded to nothing: never a fresh conversation in place of the one meant
            raise UsageError(
                "--session needs a session: a .jsonl/.db path, an id of the sessions dir, 'new' or a "
                "session URL (an unset variable's name expanded to nothing?)"
            )
        thinking = check_thinking(options.thinking)
        extra_options = stream_options(options.option)
        api_key = read_api_key(options.api_key_env)
        tools = resolve_tools(options.tools)
        checked = None
        if options.session:
            missing = _session_missing(options.session, options.sessions_dir)
            existed = False
            if missing:
                # a new session resumes nothing: a mistyped --model or a missing key fails before
                # the file is created, so it leaves no empty session behind
                checked = _checked_model(options, api_key)
                existed = is_session_path(options.session) and os.path.lexists(
                    os.path.abspath(os.path.expanduser(options.session))
                )
            session = open_session(options.session, options.sessions_dir)
            created = len(session.storage) == 0
            if missing and not existed and created:  # (never a file another run made meanwhile)
                made = session.path
        if checked is None:
            resumed = None
            if not options.model and session is not None:
                # a resumed conversation goes on with its own model (``llm -c`` does too); the
                # AGENTCORE_MODEL default serves new ones, and one whose model cannot be resumed
                try:
                    resumed = _session_model(session, options.base_url, own_key=api_key is not None)
                except UsageError:
                    if not os.environ.get(MODEL_ENV):
                        raise
            checked = _checked_model(options, api_key, resumed)
        model, stream_fn, api_key = checked
        extra: List[Any] = []
        if args is not None:  # after the model and key checks: a plugin's tools may start servers
            from ._hooks import plugin_tools

            extra = plugin_tools(args, command, taken=[tool.name for tool in tools])
        tools += extra
        from ..agent import Agent

        system = options.system
        if system is None and session is not None:
            system = recorded_system(session)
        agent = Agent(
            model,
            system_prompt=system or "",
            tools=tools if tools or options.tools is not None else None,  # None: the session's recorded tools
            api_key=api_key,
            stream_fn=stream_fn,
            session=session,
            **extra_options,
        )
        if thinking is not None:
            agent.thinking_level = thinking  # beats the level recorded in the session
    except BaseException as exc:
        if session is not None:
            session.close()
        if made:  # nor does a failure past it (a plugin's cli_tools, say): the new file goes again
            remove_quietly(made)
        if _is_corrupt(exc) and options.session:  # a malformed line past the header: exit 2, as a bad header
            from ..session.urls import redact_url

            raise UsageError(f"--session {redact_url(options.session)}: {exc}") from None
        raise
    secret = api_key
    if secret is None:  # the key the provider will take from its usual variable is masked too
        from ..providers import get_env_api_key

        secret = get_env_api_key(str(getattr(model, "provider", "")))
    return AgentSetup(
        agent,
        session,
        secret,
        created,
        extra,
        key_from_option=options.api_key_env is not None,
        system=system,
        made=made,
    )


def _checked_model(
    options: CliOptions, api_key: Optional[str], resumed: Optional[Tuple[Any, Any]] = None
) -> Tuple[Any, Optional[Callable[..., Any]], Optional[str]]:
    """``(model, stream_fn, api_key)``: ``resumed`` or the model ``--model`` (or the default)
    names, with its key (``api_key``, else the keys file's) checked. Raises :class:`UsageError`."""
    model, stream_fn = resumed or resolve_model(
        options.model, options.base_url, key_given=options.api_key_env is not None
    )
    if stream_fn is None:
        api_key = api_key or _stored_key(model)
        check_api_key(model, api_key)
    return model, stream_fn, api_key


def _session_missing(value: str, sessions_dir: Optional[str]) -> bool:
    """True when ``--session value`` names a session :func:`open_session` would create: a missing
    (or empty) file, ``new``, or an id the sessions directory does not hold. False for a session
    URL (its storage alone can tell) and whenever in doubt."""
    from ..session import SessionError

    if is_session_url(value):
        return False
    if is_session_path(value):
        path = os.path.abspath(os.path.expanduser(value))
        if path.lower().endswith(_SQLITE_SUFFIXES):
            return _is_empty_database(path)
        return not os.path.lexists(path)
    if value == "new":
        return True
    from ..session import SessionRepository

    directory = sessions_dir or default_sessions_dir()
    if not os.path.isdir(directory):
        return True  # (a SessionRepository would create it)
    try:
        SessionRepository(directory).path_of(value)
    except SessionError as exc:
        return exc.code == "not_found"
    except (OSError, ValueError):
        return False
    return False


def remove_quietly(path: Optional[str]) -> None:
    """Remove the file at ``path`` (None or "": nothing), ignoring that it is gone or cannot go."""
    if not path:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def _is_corrupt(exc: BaseException) -> bool:
    """True for a SessionError about what a session file holds (a line that is no valid entry)."""
    from ..session import SessionError

    return isinstance(exc, SessionError) and exc.code in ("invalid_entry", "invalid_session")


def _stored_key(model: Any) -> Optional[str]:
    from ._keys import stored_key

    return stored_key(str(getattr(model, "provider", "")))
