"""One scripted OpenAI-compatible server that plays several models at once:
each request is answered by the reply function registered for its ``model``
(an endpoint's model_name), so a campaign, a splitter or a four-judge panel
can run against real HTTP on this machine."""

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


class Models(BaseHTTPRequestHandler):
    replies: dict[str, Reply] = {}
    seen: list[dict] = []
    lock = threading.Lock()

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.seen.append(body)
        reply = cls.replies.get(body["model"])
        status, content = reply(body) if reply else (404, f"no model {body['model']}")
        if status == 200:
            data = {
                "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
            }  # fmt: skip
        else:
            data = {"error": {"message": content}}
        encoded = json.dumps(data, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(encoded)))
        self.end_headers()
        self.wfile.write(encoded)

    def log_message(self, *args):
        pass


@contextmanager
def serving(replies: dict[str, Reply]) -> Iterator[str]:
    Models.replies, Models.seen = dict(replies), []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


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
