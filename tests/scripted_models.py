"""Scripted OpenAI-compatible servers for the tests, on real HTTP on this machine.

``ScriptedHandler`` is the one base every test's scripted server builds on: it
reads the request, writes chat completions and error bodies, and keeps quiet;
a test's handler only decides what to answer. ``serve(handler)`` runs one on a
free port. ``Models`` plays several models at once: each request is answered by
the reply function registered for its ``model`` (an endpoint's model_name), so
a campaign, a splitter or a four-judge panel can run against one server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A reply function gets the request body and returns (status, content): content
# is the assistant's text for 200, the error message otherwise.
Reply = Callable[[dict], tuple[int, str]]


def user_text(body: dict) -> str:
    """The text of the last user message (image parts left out)."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part.get("type") == "text")


def completion(model: str, content: str, *, finish: str = "stop", usage: tuple[int, int] = (10, 4)) -> dict:
    """An OpenAI chat completion body saying ``content``."""
    prompt, answer = usage
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer},
    }  # fmt: skip


class ScriptedHandler(BaseHTTPRequestHandler):
    """The plumbing of a scripted model server; subclasses write ``do_POST``."""

    def read_body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_completion(self, body: dict, content: str, **fields) -> None:
        self.send_json(200, completion(body["model"], content, **fields))

    def send_error_status(self, status: int, message: str = "", headers: dict[str, str] | None = None) -> None:
        self.send_json(status, {"error": {"message": message or f"scripted {status}"}}, headers)

    def log_message(self, *args):
        pass


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """The handler on a free local port, as an OpenAI base URL; stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


class Models(ScriptedHandler):
    replies: dict[str, Reply] = {}
    seen: list[dict] = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        cls = type(self)
        with cls.lock:
            cls.seen.append(body)
        reply = cls.replies.get(body["model"])
        status, content = reply(body) if reply else (404, f"no model {body['model']}")
        if status == 200:
            self.send_completion(body, content)
        else:
            self.send_error_status(status, content)


@contextmanager
def serving(replies: dict[str, Reply]) -> Iterator[str]:
    Models.replies, Models.seen = dict(replies), []
    with serve(Models) as base_url:
        yield base_url


class Servers:
    """Scripted servers started by a test and stopped after it (a fixture in each test module)."""

    def __init__(self) -> None:
        self.running: list = []

    def start(self, replies: dict[str, Reply]) -> str:
        context = serving(replies)
        self.running.append(context)
        return context.__enter__()

    def stop(self) -> None:
        for context in reversed(self.running):
            context.__exit__(None, None, None)
