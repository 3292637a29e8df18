"""Drive `agentcore rpc` from another program: JSON lines on its stdin, events on its stdout.

Offline by default (the scripted demo model); set AGENTCORE_MODEL=provider/id and that provider's
key variable for a real model. Any language can do the same with a pipe; see docs/rpc.rst.
"""

import json
import os
import subprocess
import sys

model = os.environ.get("AGENTCORE_MODEL") or "scripted"
agent = subprocess.Popen(
    [sys.executable, "-m", "agentcore", "rpc", "--model", model, "--no-session"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,  # binary: records end with LF only (U+2028 in a string is no line break)
)


def stop(why):
    """End the client with a message (agentcore rpc prints its own reason on stderr)."""
    try:
        agent.stdin.close()
    except BrokenPipeError:
        pass
    raise SystemExit(f"{why} (agentcore rpc exited with status {agent.wait()})")


def send(command):
    try:
        agent.stdin.write(json.dumps(command).encode() + b"\n")
        agent.stdin.flush()
    except BrokenPipeError:  # it exited: a missing key, an unknown model ...
        stop("agentcore rpc is gone")


def lines():
    for line in agent.stdout:
        yield json.loads(line)
    stop("agentcore rpc ended before answering")


def answer(message):
    """Prompt, print the streamed text, return the run's final stop reason."""
    send({"type": "prompt", "message": message, "id": "p"})
    for event in lines():
        if event["type"] == "response" and not event["success"]:
            stop(f"refused: {event['error']}")
        if event["type"] == "message_update":
            delta = event["assistantMessageEvent"]
            if delta["type"] == "text_delta":
                print(delta["delta"], end="", flush=True)
        if event["type"] == "agent_end":
            print()
            last = event["messages"][-1]
            if last.get("stopReason") == "error":  # the request failed: say why
                stop(f"error: {last.get('errorMessage')}")
            return last.get("stopReason")


def request(command):
    """Send a command and return its response's data (responses carry the command's id)."""
    send(dict(command, id="r"))
    for event in lines():
        if event["type"] == "response" and event.get("id") == "r":
            if not event["success"]:
                stop(f"{command['type']} failed: {event['error']}")
            return event.get("data")


print("stop reason:", answer("What can an editor do with agentcore rpc?"))
answer("And a second question on the same conversation.")
stats = request({"type": "get_session_stats"})
print(f"{stats['totalMessages']} messages, {stats['tokens']['total']} tokens, ${stats['cost']:.4f}")
agent.stdin.close()  # end of input: agentcore aborts any run, closes the session and exits 0
print("agentcore rpc exited with status", agent.wait())
