"""Branching conversations, offline: record a run into a session file, reopen it, branch, compare.

    python examples/branching.py

Uses agentcore.testing's scripted model, so no API key or network is needed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from agentcore import Agent
from agentcore.session import Session, attach_session, restore_agent
from agentcore.testing import ScriptedModel


def run(session: Session, answers, question: str) -> None:
    """One prompt through a fresh agent that resumes from (and records into) the session."""
    scripted = ScriptedModel(list(answers))
    agent = Agent(scripted.model, stream_fn=scripted.stream_fn)
    restore_agent(agent, session)
    unsubscribe = attach_session(agent, session)
    agent.prompt(question)
    unsubscribe()


def show(title: str, session: Session) -> None:
    print(f"--- {title}")
    for message in session.build_context().messages:
        text = getattr(message, "summary", None) or getattr(message, "content", "")
        text = text if isinstance(text, str) else text[0].text
        print(f"  {message.role:>9}: {text}")


def main() -> None:
    path = Path(tempfile.mkdtemp()) / "demo.jsonl"

    with Session.create(path, cwd=".") as session:
        run(session, ["Use a dict keyed by user id."], "How should I cache users?")
        run(session, ["Add a TTL and evict on write."], "And invalidation?")
        show("first conversation", session)

    with Session.open(path) as session:  # resume tomorrow: the file remembers where we were
        first_answer = next(e for e in session.get_branch() if e.type == "message" and e.message.role == "assistant")
        session.append_label(first_answer.id, "cache design")
        # Go back to the first answer and try another direction; the summary records what we left.
        session.move_to(first_answer.id, summary="Explored TTL-based invalidation.")
        run(session, ["Use functools.lru_cache with maxsize=1024."], "What about an LRU instead?")
        show("branch", session)

        print("--- tree")
        stack = [(node, 0) for node in reversed(session.get_tree())]
        while stack:
            node, depth = stack.pop()
            entry = node.entry
            what = entry.message.role if entry.type == "message" else entry.type
            label = f"  [{node.label}]" if node.label else ""
            print(f"  {'  ' * depth}{entry.id} {what}{label}")
            stack.extend((child, depth + 1) for child in reversed(node.children))
        print("stats:", session.get_session_stats())
    print("session file:", path)


if __name__ == "__main__":
    main()
