"""Fixtures: the local server and fake AWS credentials (see ``bedrock_helpers``)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator

import pytest
from agentcore_bedrock import clear_credentials_cache
from bedrock_helpers import ACCESS_KEY, SECRET_KEY, Server


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Dict[str, str]:
    """Static fake credentials and region; no config files, no metadata service, no bearer token."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_DEFAULT_REGION",
        "AWS_BEDROCK_SKIP_AUTH",
        "AWS_BEDROCK_FORCE_CACHE",
        "PI_CACHE_RETENTION",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(name, raising=False)
    values = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    clear_credentials_cache()
    yield values
    clear_credentials_cache()
