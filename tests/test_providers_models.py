"""The shipped model catalog, cost calculation, keys from the environment and provider dispatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentcore
from agentcore.providers import calculate_cost, get_env_api_key
from agentcore.providers._gen_catalog import SOURCE_NAME, SUPPORTED_APIS, build_catalog
from agentcore.providers.base import ENV_API_KEYS
from agentcore.providers.models import catalog_models, find_model
from agentcore.types import Model, ModelCost, Usage

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REFERENCE_MODELS = SHARED_DATA / SOURCE_NAME  # the reference's catalog facts (pi 0.73.1)


@pytest.mark.parametrize(
    "provider, model_id, api, prices, window",
    [  # providers §20 table, with the reference's 0.73.1 prices (gemini-2.5-flash cache reads: 0.03)
        ("openai", "gpt-4o-mini", "openai-responses", (0.15, 0.6, 0.08, 0), (128000, 16384)),
        ("anthropic", "claude-sonnet-4-5", "anthropic-messages", (3, 15, 0.3, 3.75), (200000, 64000)),
        ("google", "gemini-2.5-flash", "google-generative-ai", (0.3, 2.5, 0.03, 0), (1048576, 65536)),
        ("groq", "llama-3.3-70b-versatile", "openai-completions", (0.59, 0.79, 0, 0), (131072, 32768)),
        ("mistral", "mistral-large-latest", "openai-completions", (0.5, 1.5, 0, 0), (262144, 262144)),
        ("azure-openai-responses", "gpt-5", "azure-openai-responses", (1.25, 10, 0.125, 0), (400000, 128000)),
    ],
)
def test_catalog_facts(provider, model_id, api, prices, window):
    model = find_model(provider, model_id)
    assert model is not None and model.api == api
    assert (model.cost.input, model.cost.output, model.cost.cache_read, model.cost.cache_write) == prices
    assert (model.context_window, model.max_tokens) == window


def test_registry_lookup_through_plugins():  # issue 4: get_model("provider/id"), models(provider)
    model = agentcore.get_model("anthropic/claude-haiku-4-5")
    assert model.provider == "anthropic" and model.base_url == "https://api.anthropic.com"
    groq = agentcore.models("groq")
    assert groq and all(m.provider == "groq" for m in groq)
    assert agentcore.get_provider("openai-completions").api == "openai-completions"


def test_lookup_returns_copies_and_exact_matches_only():
    model = find_model("openai", "gpt-4o-mini")
    model.cost.input = 999
    assert find_model("openai", "gpt-4o-mini").cost.input == 0.15
    assert find_model("openai", "gpt-4o") is not None and find_model("openai", "gpt-4o-min") is None


def _reference_facts() -> list:
    if not REFERENCE_MODELS.is_file():
        pytest.skip(f"shared/data/{SOURCE_NAME} not available")
    return json.loads(REFERENCE_MODELS.read_text(encoding="utf-8"))["models"]


def test_shipped_catalog_matches_the_facts():  # issue 17: the generated JSON is the generator's output
    expected = build_catalog({"models": _reference_facts()})
    assert [m.to_dict() for m in catalog_models()] == expected
    assert {m["api"] for m in expected} == set(SUPPORTED_APIS)


def test_catalog_keeps_every_fact_of_the_reference():  # issue 17: prices, windows, thinkingLevelMap verbatim
    shipped = {(m.provider, m.id): m.to_dict() for m in catalog_models()}
    spoken = 0
    for fact in _reference_facts():
        if fact["api"] not in SUPPORTED_APIS and fact["api"] != "mistral-conversations":
            assert (fact["provider"], fact["id"]) not in shipped  # a plugin's API, or none
            continue
        spoken += 1
        entry = shipped[(fact["provider"], fact["id"])]
        for key in ("cost", "contextWindow", "maxTokens", "reasoning", "input", "thinkingLevelMap", "compat"):
            assert entry.get(key) == fact.get(key), (fact["provider"], fact["id"], key)
        if fact["api"] == "mistral-conversations":  # spoken through Mistral's OpenAI-compatible endpoint
            assert (entry["api"], entry["baseUrl"]) == ("openai-completions", "https://api.mistral.ai/v1")
        else:
            assert (entry["api"], entry["baseUrl"]) == (fact["api"], fact["baseUrl"])
    assert spoken == len(shipped)
    new = {"deepseek", "fireworks", "moonshotai", "cloudflare-workers-ai", "cloudflare-ai-gateway", "mistral"}
    assert new <= {provider for provider, _ in shipped}


def test_every_catalog_api_has_a_provider_and_every_provider_a_key_variable():  # issue 17
    catalog = catalog_models()
    for api in {m.api for m in catalog}:
        assert agentcore.get_provider(api).api == api
    assert sorted({m.provider for m in catalog} - set(ENV_API_KEYS)) == []
    assert get_env_api_key("moonshotai-cn", {"MOONSHOT_API_KEY": "m"}) == "m"
    assert get_env_api_key("cloudflare-ai-gateway", {"CLOUDFLARE_API_KEY": "c"}) == "c"
    assert get_env_api_key("fireworks", {"FIREWORKS_API_KEY": "f"}) == "f"
    assert get_env_api_key("azure-openai-responses", {"AZURE_OPENAI_API_KEY": "a"}) == "a"


def test_plugin_catalogs_hold_the_reference_models_of_their_api():  # issue 17: bedrock, vertex
    facts = _reference_facts()
    for module, function, api in (
        ("agentcore_bedrock.models", "bedrock_models", "bedrock-converse-stream"),
        ("agentcore_vertex.plugin", "vertex_models", "google-vertex"),
    ):
        plugin = pytest.importorskip(module)
        shipped = {m.id: m.to_dict() for m in getattr(plugin, function)()}
        expected = {f["id"]: f for f in facts if f["api"] == api}
        assert set(shipped) == set(expected), api
        for model_id, fact in expected.items():
            for key in ("cost", "contextWindow", "maxTokens", "baseUrl", "thinkingLevelMap"):
                assert shipped[model_id].get(key) == fact.get(key), (api, model_id, key)


def test_cost_per_million_tokens():  # providers §7
    model = Model(id="m", cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75))
    usage = Usage(input=1_000_000, output=2000, cache_read=10_000, cache_write=4000)
    cost = calculate_cost(model, usage)
    assert cost is usage.cost
    assert (cost.input, cost.output, cost.cache_read, cost.cache_write) == pytest.approx((3.0, 0.03, 0.003, 0.015))
    assert cost.total == pytest.approx(3.048)


def test_unknown_or_broken_prices_cost_zero():  # issue 4: never crash
    assert calculate_cost(Model(id="local"), Usage(input=10, output=10)).total == 0.0
    odd = Model(id="odd")
    odd.cost = None
    assert calculate_cost(odd, Usage(input=10)).total == 0.0
    weird = Model(id="w", cost=ModelCost(input="n/a", output=None))  # type: ignore[arg-type]
    assert calculate_cost(weird, Usage(input=10, output=5)).total == 0.0


def test_env_api_keys():  # providers §19
    env = {
        "ANTHROPIC_API_KEY": "a",
        "ANTHROPIC_OAUTH_TOKEN": "oauth",
        "GH_TOKEN": "gh",
        "GITHUB_TOKEN": "gt",
        "HF_TOKEN": "hf",
        "AWS_PROFILE": "dev",
    }
    assert get_env_api_key("anthropic", env) == "oauth"
    assert get_env_api_key("github-copilot", env) == "gh"
    assert get_env_api_key("huggingface", env) == "hf"
    assert get_env_api_key("amazon-bedrock", env) == "<authenticated>"
    assert get_env_api_key("openai", env) is None and get_env_api_key("my-local", env) is None


# --------------------------------------------------------------------------- the user's models.json

from agentcore import plugins  # noqa: E402
from agentcore.providers.user_models import UserModelsError, load_user_models, user_models_path  # noqa: E402

USER_FILE = {
    "models": [
        {"id": "llama3.2", "provider": "ollama", "api": "openai-completions", "baseUrl": "http://127.0.0.1:11434/v1"},
        {"provider": "openai", "id": "gpt-4o-mini", "baseUrl": "https://proxy.example/v1", "cost": {"input": 0.1}},
    ],
    "providers": {
        "my-vllm": {
            "api": "openai-completions",
            "baseUrl": "http://gpu:8000/v1",
            "compat": {"supportsDeveloperRole": False},
            "models": [{"id": "Qwen/Qwen3-8B", "reasoning": True, "contextWindow": 40960}],
        }
    },
}


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    """``write(document)``: the user's models file (AGENTCORE_MODELS) with fresh plugin tables."""
    path = tmp_path / "models.json"

    def write(document):
        path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
        monkeypatch.setenv("AGENTCORE_MODELS", str(path))
        plugins.reset_plugins()
        return path

    yield write
    monkeypatch.undo()
    plugins.reset_plugins()


def test_user_models_extend_and_override_the_catalog(user_models):  # issue 17: models.json without code
    path = user_models(USER_FILE)
    loaded = {m.key: m for m in load_user_models(path)}
    assert list(loaded) == ["ollama/llama3.2", "openai/gpt-4o-mini", "my-vllm/Qwen/Qwen3-8B"]
    ollama = agentcore.get_model("ollama/llama3.2")
    assert (ollama.api, ollama.base_url, ollama.context_window) == (
        "openai-completions",
        "http://127.0.0.1:11434/v1",
        128000,
    )
    proxied = agentcore.get_model("openai/gpt-4o-mini")  # merged over the catalog entry
    assert proxied.base_url == "https://proxy.example/v1" and proxied.api == "openai-responses"
    assert (proxied.cost.input, proxied.cost.output, proxied.context_window) == (0.1, 0.6, 128000)
    qwen = agentcore.get_model("my-vllm/Qwen/Qwen3-8B")
    assert qwen.reasoning and qwen.compat == {"supportsDeveloperRole": False} and qwen.base_url == "http://gpu:8000/v1"
    assert find_model("openai", "gpt-4o-mini").base_url == "https://api.openai.com/v1"  # the catalog itself
    entry = plugins.default_plugin_manager().registry("model")["openai/gpt-4o-mini"]
    assert entry.source == "agentcore.providers.user_models"


@pytest.mark.parametrize(
    "document, expected",
    [
        ('{"models": [', "is not valid JSON: Expecting value: line 1 column 13"),
        ({"model": []}, "unknown top-level key(s) ['model']"),
        ({"models": [{"id": "x", "provider": "p"}]}, 'models[0] (p/x): "api" is required for a model'),
        (
            {"models": [{"id": "x", "provider": "p", "api": "openai-completions", "contextWindow": "big"}]},
            "models[0] (p/x): \"contextWindow\" must be a positive integer, got 'big'",
        ),
        (
            {"models": [{"id": "x", "provider": "p", "api": "a", "contextwindow": 1}]},
            "models[0] (p/x): unknown key(s) ['contextwindow']",
        ),
        ({"models": [{"provider": "openai", "id": "gpt-4o", "cost": {"input": "cheap"}}]}, '"cost.input" must be'),
        (
            {"providers": {"p": {"apiKey": "sk-secret-value", "models": []}}},
            "providers['p']: API keys do not belong in models.json",
        ),
        ({"providers": {"p": {"models": [{"id": "m", "input": ["audio"]}]}}}, "providers['p'][\"models\"][0] (p/m)"),
        ({"models": [{"id": "x", "provider": "p", "api": "a", "headers": "Bearer sk-1"}]}, '"headers" must be'),
        # malformed values that used to load (NaN prices make every cost NaN), or crashed with a
        # bare TypeError/RecursionError, or failed only at request time without naming the file
        (
            '{"models": [{"id": "x", "provider": "p", "api": "a", "cost": {"input": NaN}}]}',
            '"cost.input" must be a finite',
        ),
        ('{"models": [{"id": "x", "provider": "p", "api": "a", "cost": {"output": 1e400}}]}', '"cost.output" must be'),
        ({"models": [{"id": "x", "provider": "p", "api": "a", "input": [["text"]]}]}, '"input" must be a list of'),
        ({"providers": {"openai": {"baseUrl": "http://h/v1", "models": [{"id": ["gpt-4o"]}]}}}, '"id" is required'),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be read as JSON"),
        (
            {
                "models": [
                    {"id": "x", "provider": "p", "api": "a", "headers": {"X-Key": "sk-secret-value\r\nX-Evil: 1"}}
                ]
            },
            "models[0] (p/x): header 'X-Key' has a line break",
        ),
        ({"models": [{"id": "x", "provider": "p", "api": "a", "headers": {"X Key": "v"}}]}, "'X Key' is not an HTTP"),
        (
            {"models": [{"id": "x", "provider": "p", "api": "a", "thinkingLevelMap": {"high": 5}}]},
            '"thinkingLevelMap.high" must be a string or null, got 5',
        ),
        (
            {"models": [{"id": "x", "provider": "p", "api": "a", "thinkingLevelMap": {"hihg": "max"}}]},
            "\"thinkingLevelMap\" has unknown level 'hihg'",
        ),
    ],
)
def test_malformed_user_models_name_the_file_and_entry(user_models, document, expected):  # issue 17
    path = user_models(document)
    with pytest.raises(UserModelsError) as caught:
        load_user_models(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and expected in message, message
    assert "sk-secret-value" not in message and "sk-1" not in message


def test_a_malformed_user_file_leaves_the_catalog_usable(user_models):  # issue 17: nothing is lost
    path = user_models({"models": [{"id": "x", "provider": "p"}]})
    with pytest.warns(plugins.PluginLoadWarning, match=str(path).replace("\\", "\\\\")):
        assert agentcore.get_model("openai/gpt-4o-mini").base_url == "https://api.openai.com/v1"
    with pytest.raises(KeyError):
        agentcore.get_model("p/x")


def test_user_models_path_and_lazy_loading(tmp_path):  # issue 17: env var, config dir, import stays light
    import subprocess
    import sys

    assert user_models_path({}) == Path.home() / ".agentcore" / "models.json"
    assert user_models_path({"AGENTCORE_MODELS": "~/m.json"}) == Path.home() / "m.json"
    assert user_models_path({"AGENTCORE_MODELS": ""}) is None and load_user_models(tmp_path / "absent.json") == []
    # a HOME that is no folder (HOME=/dev/null for a service): no file, not "cannot be read"
    (tmp_path / "home").write_text("a file")
    assert load_user_models(tmp_path / "home" / ".agentcore" / "models.json") == []
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    code = "import agentcore, sys; print('agentcore.providers.user_models' in sys.modules)"
    env = dict(__import__("os").environ, AGENTCORE_MODELS=str(broken))
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "False", "")


def test_user_models_win_over_installed_plugins(user_models):  # issue 17: the user's file is registered last
    plugins.reset_plugins()
    bedrock = [m for m in agentcore.models("amazon-bedrock") if m.id == "amazon.nova-micro-v1:0"]
    if not bedrock:
        pytest.skip("agentcore-bedrock is not installed")
    full = dict(bedrock[0].to_dict(), baseUrl="https://bedrock-runtime.eu-west-3.amazonaws.com")
    user_models({"models": [full]})
    entry = plugins.default_plugin_manager().registry("model")["amazon-bedrock/amazon.nova-micro-v1:0"]
    assert entry.source == "agentcore.providers.user_models" and "bedrock" in entry.shadowed
    assert agentcore.get_model("amazon-bedrock/amazon.nova-micro-v1:0").base_url.endswith("eu-west-3.amazonaws.com")


def _entry(**kw):
    base = {
        "id": "m",
        "api": "openai-completions",
        "provider": "p",
        "baseUrl": "https://example.invalid/v1",
        "reasoning": True,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 1000,
        "maxTokens": 100,
    }
    base.update(kw)
    return base


def test_catalog_thinking_level_map_and_older_reasoning_effort_map():  # issue 17: Model.thinking_level_map
    from agentcore.providers.reasoning import clamp_to_model, mapped_effort, supported_levels

    catalog = [
        Model.from_dict(_entry(id="new", thinkingLevelMap={"off": None, "minimal": None, "xhigh": "max"})),
        Model.from_dict(_entry(id="old", compat={"reasoningEffortMap": {"low": "lite", "xhigh": "x"}})),
        Model.from_dict(_entry(id="plain")),
        Model.from_dict(_entry(id="no-thinking", reasoning=False, thinkingLevelMap={"high": "h"})),
    ]
    new, old, plain, none = catalog
    assert new.thinking_level_map == {"off": None, "minimal": None, "xhigh": "max"}
    assert supported_levels(new) == ("low", "medium", "high", "xhigh")  # null = unsupported; max unmapped
    assert [clamp_to_model(new, lv) for lv in ("off", "minimal", "max")] == ["low", "low", "xhigh"]
    assert (mapped_effort(new, "xhigh"), mapped_effort(new, "max"), mapped_effort(new, "high")) == ("max", "max", None)
    assert old.thinking_level_map is None and mapped_effort(old, "low") == "lite"  # still read
    assert supported_levels(old) == ("off", "minimal", "low", "medium", "high", "xhigh")
    assert (
        supported_levels(plain) == ("off", "minimal", "low", "medium", "high") and clamp_to_model(plain, "max") == "max"
    )
    assert supported_levels(none) == ("off",)


def test_an_agentcore_models_path_that_does_not_exist_is_reported(tmp_path, monkeypatch):  # issue 17
    # a typo in $AGENTCORE_MODELS must not silently drop the user's models ("unknown model" later);
    # the default ~/.agentcore/models.json is optional and stays silent when absent
    missing = tmp_path / "modles.json"
    monkeypatch.setenv("AGENTCORE_MODELS", str(missing))
    with pytest.raises(UserModelsError, match=r"does not exist \(\$AGENTCORE_MODELS; set it empty") as caught:
        load_user_models()
    assert str(caught.value).startswith(f"{missing}: ")
    plugins.reset_plugins()
    try:
        with pytest.warns(plugins.PluginLoadWarning, match="does not exist"):
            assert agentcore.get_model("openai/gpt-4o-mini")  # the catalog stays usable
    finally:
        monkeypatch.undo()
        plugins.reset_plugins()
    monkeypatch.delenv("AGENTCORE_MODELS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_user_models() == [] and load_user_models(missing) == []


def test_a_provider_block_without_models_re_points_the_catalog_provider(user_models):  # issue 17: reference
    # {"providers": {"deepseek": {"baseUrl": ...}}} routes every catalog deepseek model through a
    # proxy (the reference's "override a built-in provider"); the catalog's compat is kept
    path = user_models(
        {
            "providers": {
                "deepseek": {"baseUrl": "http://127.0.0.1:9/v1", "compat": {"supportsStore": False}},
                "openai": {"baseUrl": "https://proxy.example/v1", "models": [{"id": "gpt-4o", "contextWindow": 1000}]},
            }
        }
    )
    flash = agentcore.get_model("deepseek/deepseek-v4-flash")
    assert flash.base_url == "http://127.0.0.1:9/v1" and flash.cost.input == 0.14
    assert flash.compat == {
        "requiresReasoningContentOnAssistantMessages": True,
        "thinkingFormat": "deepseek",
        "supportsStore": False,
    }
    assert agentcore.get_model("deepseek/deepseek-v4-pro").base_url == "http://127.0.0.1:9/v1"
    listed = agentcore.get_model("openai/gpt-4o")
    assert (listed.base_url, listed.context_window) == ("https://proxy.example/v1", 1000)
    assert agentcore.get_model("openai/gpt-4o-mini").base_url == "https://proxy.example/v1"
    assert find_model("deepseek", "deepseek-v4-flash").base_url == "https://api.deepseek.com"  # catalog intact
    path = user_models({"providers": {"deepsek": {"baseUrl": "http://127.0.0.1:9/v1"}}})
    with pytest.raises(UserModelsError, match=r"providers\['deepsek'\]: the catalog has no models of provider"):
        load_user_models(path)


def test_a_user_file_with_a_bom_is_read(user_models):  # Windows editors (Notepad, PowerShell) write one
    path = user_models("")
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"models": USER_FILE["models"][:1]}).encode("utf-8"))
    assert [m.key for m in load_user_models(path)] == ["ollama/llama3.2"]


def test_a_model_given_twice_is_an_error_naming_both_entries(user_models):
    # the registry keeps the first registration of a key: the second entry was silently ignored
    first = {"id": "m", "provider": "p", "api": "openai-completions", "contextWindow": 1000}
    path = user_models({"models": [first], "providers": {"p": {"api": "openai-completions", "models": [{"id": "m"}]}}})
    with pytest.raises(UserModelsError) as caught:
        load_user_models(path)
    assert str(caught.value) == f"{path}: providers['p'][\"models\"][0] (p/m) repeats models[0]: give each model once"


def test_a_provider_block_also_re_points_a_catalog_model_listed_at_top_level(user_models):
    # {"providers": {"openai": {"baseUrl": proxy}}} with a top-level entry changing one openai model's
    # contextWindow: that model went to api.openai.com instead of the proxy (its override was dropped)
    user_models(
        {
            "models": [{"provider": "openai", "id": "gpt-4o", "contextWindow": 1000, "headers": {"X-B": "mine"}}],
            "providers": {"openai": {"baseUrl": "https://proxy.example/v1", "headers": {"X-A": "a", "X-B": "b"}}},
        }
    )
    model = agentcore.get_model("openai/gpt-4o")
    assert (model.base_url, model.context_window, model.headers) == (
        "https://proxy.example/v1",
        1000,
        {"X-A": "a", "X-B": "mine"},
    )
    assert agentcore.get_model("openai/gpt-4o-mini").base_url == "https://proxy.example/v1"


def test_a_key_given_twice_in_one_object_is_an_error_not_a_lost_block(user_models):
    # json.loads keeps the last of two equal keys: the first "my-vllm" block (and its model) vanished
    first, second = (
        {"api": "openai-completions", "baseUrl": f"http://{h}:8000/v1", "models": [{"id": i}]}
        for h, i in (("gpu1", "a"), ("gpu2", "b"))
    )
    text = f'{{"providers": {{"my-vllm": {json.dumps(first)}, "my-vllm": {json.dumps(second)}}}}}'
    path = user_models(text)
    with pytest.raises(UserModelsError) as caught:
        load_user_models(path)
    assert str(caught.value) == (
        f"{path}: the key 'my-vllm' appears twice in one object: give each key once (JSON keeps only the last one)"
    )
    path = user_models('{"models": [], "models": [{"id": "x", "provider": "p", "api": "a"}]}')
    with pytest.raises(UserModelsError, match="the key 'models' appears twice"):
        load_user_models(path)


def test_a_listed_model_keeps_the_headers_and_compat_of_its_provider_block(user_models):
    # the block's headers were replaced by the model's own: X-Org (an org/proxy header) was not sent
    path = user_models(
        {
            "providers": {
                "openai": {
                    "headers": {"X-Org": "acme", "X-B": "block"},
                    "models": [{"id": "gpt-4o", "headers": {"X-Trace": "1", "X-B": "mine"}}],
                },
                "my-vllm": {
                    "api": "openai-completions",
                    "baseUrl": "http://gpu:8000/v1",
                    "compat": {"supportsDeveloperRole": False},
                    "models": [{"id": "q", "compat": {"supportsStore": False}}],
                },
            }
        }
    )
    loaded = {m.key: m for m in load_user_models(path)}
    assert loaded["openai/gpt-4o"].headers == {"X-Org": "acme", "X-B": "mine", "X-Trace": "1"}
    assert loaded["openai/gpt-4o-mini"].headers == {"X-Org": "acme", "X-B": "block"}  # not listed: the block's
    assert loaded["my-vllm/q"].compat == {"supportsDeveloperRole": False, "supportsStore": False}


# --------------------------------------------------------------------------- stream options


@pytest.mark.parametrize(
    "options, expected",
    [  # used to pass the checks: a provider then failed in int(budget) or in the socket
        # ("OverflowError: timestamp out of range for platform time_t"), or used "medium" silently
        ({"thinking_budgets": {"high": "lots"}}, "thinking_budgets {'high': 'lots'}: the budget of 'high' must be an"),
        ({"thinking_budgets": {"low": True}}, "the budget of 'low' must be an integer number of tokens, not True"),
        ({"thinking_budgets": {"hihg": 30000}}, "'hihg' is not a thinking level; use minimal, low, medium, high"),
        ({"reasoning": "hihg"}, "reasoning 'hihg': choose one of off, minimal, low, medium, high, xhigh, max"),
        ({"timeout": 1e12}, "timeout 1000000000000.0: must be at most 1e+09 seconds"),
        ({"timeout": (10, 1e12)}, "timeout (10, 1000000000000.0): must be at most 1e+09 seconds"),
        ({"timeout_ms": 10**15}, "timeout_ms 1000000000000000: must be at most 1e+12 milliseconds"),
    ],
)
def test_stream_options_refuse_budgets_and_levels_no_provider_can_use(options, expected):
    from agentcore.options import StreamOptions, parse_cli_option
    from agentcore.providers import complete
    from agentcore.types import AgentContext, UserMessage

    with pytest.raises(ValueError, match="StreamOptions\\(\\): ") as caught:
        StreamOptions(**options)
    assert expected in str(caught.value)
    model = Model(id="m", api="anthropic-messages", provider="p", base_url="http://127.0.0.1:9", reasoning=True)
    message = complete(model, AgentContext(messages=[UserMessage("hi")]), max_retries=0, **options)
    assert message.stop_reason == "error" and message.error_message.startswith("stream(): ")
    assert expected in message.error_message
    ((name, value),) = options.items()
    if name != "reasoning":  # -o NAME VALUE (reasoning is --thinking's)
        with pytest.raises(ValueError, match=f"-o/--option {name} .*(must be|not a thinking level)"):
            parse_cli_option(name, json.dumps(value))


def test_stream_options_keep_every_thinking_level_and_budget():
    from agentcore.options import StreamOptions

    for level in ("off", "None", "", "minimal", "low", "Medium", "high", "xhigh", "max"):
        assert StreamOptions(reasoning=level).reasoning == level
    budgets = {"minimal": 512, "low": 1024, "medium": None, "high": -1, "xhigh": 40000, "max": 64000}
    assert StreamOptions(thinking_budgets=budgets).thinking_budgets == budgets
    assert StreamOptions(timeout=(10, 10**9), timeout_ms=10**12).timeout == (10, 10**9)


@pytest.mark.parametrize(
    "base_url, shown",
    [
        ("me:pw-secret-1@proxy.example:8080/v1", "me:***@proxy.example:8080/v1"),
        ("me:pw-secret-1@proxy.example/v1?key=k-secret-2", "me:***@proxy.example/v1?key=***"),
        ("me:pw-secret-1@proxy.example", "me:***@proxy.example"),
    ],
)
def test_a_model_repr_hides_the_password_of_a_base_url_without_its_scheme(base_url, shown):
    """``user:password@proxy/v1`` (``http://`` forgotten) is a scheme and a path to URL parsers, so
    the repr of the model (printed in notebooks, logs, tracebacks) showed the password whole."""
    model = Model(id="m", api="openai-completions", provider="p", base_url=base_url)
    assert f"base_url={shown!r}" in repr(model)
    assert "secret" not in repr(model)
    for text in ("localhost:8080/v1", "me@host/v1", "notes.jsonl", "C:\\x:y@z.jsonl"):  # nothing to hide
        assert repr(Model(id="m", base_url=text)).count(repr(text)) == 1
