"""agentcore quickstart: a tool-using agent whose streamed events are printed. Offline by default (a
scripted model plays the LLM). For a real model set AGENTCORE_MODEL=provider/id plus that provider's
key variable, or OPENAI_BASE_URL (and OPENAI_MODEL) for a local server; a failed request exits 1."""

import ast
import operator
import os

from agentcore import Agent, Model, tool
from agentcore.testing import ScriptedModel, call, response, text

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):  # negative numbers
        return -_evaluate(node.operand)
    raise ValueError("only numbers, + - * / and parentheses are supported")


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as "123 * 456".

    Args:
        expression: Numbers, + - * / and parentheses.
    """
    return f"{expression} = {_evaluate(ast.parse(expression, mode='eval').body)}"


def choose_model():
    """A configured real model if any, else the offline scripted one."""
    try:
        if os.environ.get("AGENTCORE_MODEL", "scripted") not in ("", "scripted"):  # as the CLI reads it
            from agentcore import get_model

            return get_model(os.environ["AGENTCORE_MODEL"])
        if os.environ.get("OPENAI_BASE_URL"):
            model_id, url = os.environ.get("OPENAI_MODEL", "local-model"), os.environ["OPENAI_BASE_URL"]
            return Model(id=model_id, api="openai-completions", provider="local", base_url=url)
    except Exception as exc:  # anything wrong with the configuration: stay offline
        print(f"(real model unavailable: {exc}; using the scripted model)")
    answers = [
        response("Let me work that out.", call("calculate", {"expression": "123 * 456"})),
        text("123 × 456 is 56088."),
    ]
    return ScriptedModel(answers, tokens_per_second=200).model  # a registered provider: no stream_fn needed


def show(event):
    """Print one agent event readably."""
    if event.type == "message_update":
        inner = event.assistant_message_event
        if inner.type in ("text_delta", "thinking_delta"):
            print(inner.delta, end="", flush=True)
    elif event.type == "message_end" and event.message.role == "assistant":
        print(f"  [model error: {event.message.error_message}]" if event.message.error_message else "")
    elif event.type == "tool_execution_start":
        print(f"  -> {event.tool_name}({event.args})")
    elif event.type == "tool_execution_end":
        text_out = "".join(getattr(b, "text", "") for b in event.result.content)
        print(f"  <- {'error' if event.is_error else 'ok'}: {text_out}")


def main():
    agent = Agent(choose_model(), system_prompt="You are a careful calculator. Use the tool.", tools=[calculate])
    agent.subscribe(show)
    agent.prompt("What is 123 * 456?")
    print(f"{len(agent.state.messages)} messages in the transcript")
    return 1 if agent.state.messages[-1].stop_reason == "error" else 0  # the error is printed above


if __name__ == "__main__":
    raise SystemExit(main())
