"""The OpenAI client path against a real OpenAI-compatible server on this machine.

``transformers serve`` (from .venv-ml) serves a tiny, randomly initialised LLaVA model that
tests/model_server.py builds at test time; the client is the real ``openai`` package from the
project's venv. Skips when .venv-ml is missing (``scripts/ml-venv.sh`` creates it).
"""

import base64
import socket
import struct
import zlib

import openai
import pytest

MAX_TOKENS = 5


@pytest.fixture(scope="session")
def served(tiny_model_server):  # noqa: F811
    return tiny_model_server


@pytest.fixture(scope="session")
def client(served):
    base_url, _ = served
    return openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=60)


def _png_data_url(width=40, height=30, rgb=(200, 30, 30)) -> str:
    """A solid-colour PNG as a data URL, written by hand (no Pillow needed)."""
    row = b"\x00" + bytes(rgb) * width
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


def _chat(client, model, content, **kwargs):
    return client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": content}],
        max_tokens=kwargs.pop("max_tokens", MAX_TOKENS),
        temperature=0,
        **kwargs,
    )


def test_it_lists_the_served_model(client, served):
    _, model = served
    ids = [m.id for m in client.models.list().data]
    assert model in ids


def test_it_answers_a_chat_completion_with_usage_and_finish_reason(client, served):
    _, model = served
    response = _chat(client, model, "What is 2 + 3?")
    choice = response.choices[0]
    assert isinstance(choice.message.content, str) and choice.message.content
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("length", "stop")
    usage = response.usage
    assert usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= MAX_TOKENS
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    # transformers serve reports the model with its revision: "name@main"
    assert response.model.split("@")[0] == model


def test_it_answers_the_same_prompt_the_same_way(client, served):
    _, model = served
    first = _chat(client, model, "Name a prime number.")
    second = _chat(client, model, "Name a prime number.")
    assert first.choices[0].message.content == second.choices[0].message.content


def test_it_stops_at_max_tokens(client, served):
    _, model = served
    response = _chat(client, model, "Count to one hundred.", max_tokens=2)
    assert response.usage.completion_tokens <= 2
    # random weights rarely pick the end-of-turn token, so the cap is what stops it
    assert response.choices[0].finish_reason in ("length", "stop")


def test_it_accepts_an_image_as_a_base64_data_url(client, served):
    _, model = served
    question = {"type": "text", "text": "What colour is this figure?"}
    image = {"type": "image_url", "image_url": {"url": _png_data_url()}}
    with_image = _chat(client, model, [question, image])
    text_only = _chat(client, model, [question])
    assert with_image.choices[0].message.content
    # The image reached the model: it adds its placeholder tokens (4 patches and a newline) to the prompt.
    assert with_image.usage.prompt_tokens > text_only.usage.prompt_tokens


def test_it_streams_a_reply(client, served):
    _, model = served
    stream = _chat(client, model, "Say hello.", stream=True)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")
    final_usage = [c.usage for c in chunks if c.usage]
    assert final_usage and final_usage[-1].completion_tokens <= MAX_TOKENS


def test_it_refuses_a_wrong_model_name_clearly(client):
    with pytest.raises(openai.BadRequestError) as caught:
        _chat(client, "no-such/model", "Hello")
    assert caught.value.status_code == 400
    # FastAPI's {"detail": ...} body, not OpenAI's {"error": {...}}: the client keeps it in .body
    assert "no-such/model" in str(caught.value.body)
    assert "k12vista/tiny-llava" in str(caught.value.body)  # names the model it does serve


def test_it_raises_a_connection_error_when_the_server_is_down():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    down = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=5)
    with pytest.raises(openai.APIConnectionError):
        down.chat.completions.create(model="any", messages=[{"role": "user", "content": "Hello"}], max_tokens=1)


def test_it_accepts_but_does_not_enforce_a_json_schema_response_format(client, served):
    """transformers serve 5.18 ignores response_format (it logs "Ignoring unsupported fields"); vLLM
    enforces it. Code that needs JSON must still parse and validate what comes back."""
    _, model = served
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    response = _chat(
        client,
        model,
        "Answer in JSON.",
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    )
    unconstrained = _chat(client, model, "Answer in JSON.")
    # Ignored, not enforced: greedy decoding gives word for word the reply asked for without it.
    assert response.choices[0].message.content
    assert response.choices[0].message.content == unconstrained.choices[0].message.content
