"""The README's Python examples compile and the error text it quotes is the real one."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from agentcore_vertex import VertexConfigError
from agentcore_vertex.provider import resolve_location

from agentcore.types import Model

README = (Path(__file__).resolve().parents[1] / "README.rst").read_text(encoding="utf-8")


def _python_blocks():
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:(?:   .*)?\n)+)", README)
    return [textwrap.dedent(b) for b in blocks]


def test_python_examples_compile():
    blocks = _python_blocks()
    assert len(blocks) == 2
    for block in blocks:
        compile(block, "README.rst", "exec")


def test_quoted_missing_location_error_is_the_real_message():
    with pytest.raises(VertexConfigError) as info:
        resolve_location(Model(id="m", base_url="https://{location}-aiplatform.googleapis.com"), env={})
    quoted = re.search(r"``(Vertex AI needs a location:.*?)``", README, re.S).group(1)
    assert " ".join(quoted.split()) == str(info.value)
