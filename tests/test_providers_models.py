"""The shipped model catalog, cost calculation, keys from the environment and provider dispatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentcore
from agentcore.providers import calculate_cost, get_env_api_key
from agentcore.providers._gen_catalog import SUPPORTED_APIS, build_catalog
from agentcore.providers.models import catalog_models, find_model
from agentcore.types import Model, ModelCost, Usage

SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "data" / "models.json"


@pytest.mark.parametrize(
    "provider, model_id, api, prices, window",
    [  # providers §20 table
        ("openai", "gpt-4o-mini", "openai-responses", (0.15, 0.6, 0.08, 0), (128000, 16384)),
        ("anthropic", "claude-sonnet-4-5", "anthropic-messages", (3, 15, 0.3, 3.75), (200000, 64000)),
        ("google", "gemini-2.5-flash", "google-generative-ai", (0.3, 2.5, 0.075, 0), (1048576, 65536)),
        ("groq", "llama-3.3-70b-versatile", "openai-completions", (0.59, 0.79, 0, 0), (131072, 32768)),
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


def test_shipped_catalog_matches_the_facts():  # the generated JSON is the generator's output
    if not SHARED_MODELS.is_file():
        pytest.skip("shared/data/models.json not available")
    expected = build_catalog(json.loads(SHARED_MODELS.read_text(encoding="utf-8")))
    assert [m.to_dict() for m in catalog_models()] == expected
    assert {m["api"] for m in expected} <= set(SUPPORTED_APIS)


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
    from agentcore.providers._reasoning import clamp_to_model, mapped_effort, supported_levels

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
