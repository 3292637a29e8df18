"""Fixtures: the local Vertex-path server, and an environment without any real Google Cloud
configuration (no project, location, key or ADC file, no metadata-server probe)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from vertex_helpers import GOOGLE_ENV, VertexServer


@pytest.fixture
def server() -> Iterator[VertexServer]:
    srv = VertexServer()
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture(autouse=True)
def clean_google_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real project, location, key or ADC file, and no metadata-server probe (no network)."""
    for name in GOOGLE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    # google-auth reads NO_GCE_CHECK once, when it first imports its metadata module, and only
    # "true" counts: set both, or a test run on Google Cloud would find the machine's credentials
    from google.auth.compute_engine import _metadata

    monkeypatch.setenv("NO_GCE_CHECK", "true")
    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)
