"""Calling a model through the OpenAI-compatible API (vllm serve, closed APIs,
transformers serve): the one client construction, what a call returns, and how
failures are classified. The calls themselves (retries, the shared limit per
endpoint, fan-out) are inference.calls.

Every client is built here (``build_client``), so every model call obeys the same
four rules: the URL is inside MODEL_URL_ALLOWLIST (checked again at call time, not
only when the endpoint was saved), the API key comes only from a variable declared
in MODEL_API_KEY_VARIABLES, goes only to the URLs MODEL_API_KEY_URLS binds to that
variable, and redirects are never followed (a 3xx would otherwise
carry the request body and the key to an address nobody allowed)."""

from __future__ import annotations

import base64
import io
import os
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import urlsplit

import httpx2
import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext, gettext_lazy
from django.utils.translation import gettext as _
from openai.types.chat import ChatCompletion
from PIL import Image

from k12vista.job_text import JobFailure, failure_wording

if TYPE_CHECKING:
    from inference.models import ModelEndpoint

# Worth another try after a pause: the server is busy, restarting or slow.
TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504}


class ModelCallError(Exception):
    """A call that failed for good; ``transient`` says whether retrying later may help."""

    def __init__(self, message: str, *, transient: bool, attempts: int) -> None:
        super().__init__(message)
        self.transient = transient
        self.attempts = attempts


class EndpointError(ValueError):
    """An endpoint setting that cannot be used; the message says which and why."""


# --- where a model call may go ------------------------------------------------------

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class AllowedPrefix:
    """One MODEL_URL_ALLOWLIST entry: ``scheme://host[:port][/path]``, where port is a
    number, a range ``8000-8010`` or ``*`` (any), and no port means the scheme's default."""

    scheme: str
    host: str
    ports: range
    path: str

    def admits(self, scheme: str, host: str, port: int, path: str) -> bool:
        if (scheme, host) != (self.scheme, self.host) or port not in self.ports:
            return False
        # On a segment boundary: /v1 admits /v1 and /v1/chat, never /v10.
        return not self.path or path == self.path or path.startswith(self.path + "/")


def _split_port(netloc: str) -> str | None:
    """The text after the host's colon (None when there is no colon); IPv6 hosts are bracketed."""
    host_port = netloc.rpartition("]")[2] if netloc.startswith("[") else netloc
    return host_port.partition(":")[2] if ":" in host_port else None


def parse_allowed_prefix(entry: str) -> AllowedPrefix:
    parts = urlsplit(entry.strip())
    port_text = _split_port(parts.netloc)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc or parts.query:
        raise ImproperlyConfigured(f"MODEL_URL_ALLOWLIST entry {entry!r} is not scheme://host[:port][/path]")
    if port_text is None:
        ports = range(DEFAULT_PORTS[parts.scheme], DEFAULT_PORTS[parts.scheme] + 1)
    elif port_text == "*":
        ports = range(1, 65536)
    else:
        low, dash, high = port_text.partition("-")
        high = high if dash else low
        if not (low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high) <= 65535):
            raise ImproperlyConfigured(
                f"MODEL_URL_ALLOWLIST entry {entry!r}: the port is a number, a range such as 8000-8010, or *"
            )
        ports = range(int(low), int(high) + 1)
    path = parts.path.rstrip("/")
    path = path[:-2] if path.endswith("/*") else path  # "/v1/*" says what "/v1" says: that path and below
    return AllowedPrefix(parts.scheme, parts.hostname, ports, path.rstrip("/"))


def allowed_prefixes() -> list[AllowedPrefix]:
    return [parse_allowed_prefix(entry) for entry in settings.MODEL_URL_ALLOWLIST]


def url_parts(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of a model URL, or EndpointError when it is malformed."""
    parts = urlsplit(url.strip())
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise EndpointError(gettext("%(url)s is not an http(s) URL") % {"url": repr(url)})
    if "@" in parts.netloc:
        raise EndpointError(gettext("a model URL carries no user name or password; name the key's variable instead"))
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:  # "Port out of range" or not a number
        raise EndpointError(gettext("%(url)s has no valid port (1-65535)") % {"url": repr(url)}) from None
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def check_endpoint_url(url: str) -> str:
    """The URL normalised (``scheme://host:port/path``), or EndpointError when it is
    malformed or no MODEL_URL_ALLOWLIST entry admits its scheme, host, port and path."""
    scheme, hostname, port, path = url_parts(url)
    parts = urlsplit(url.strip())
    if not any(prefix.admits(scheme, hostname, port, path) for prefix in allowed_prefixes()):
        raise EndpointError(
            gettext("%(server)s is not in MODEL_URL_ALLOWLIST; an administrator adds model servers there.")
            % {"server": f"{scheme}://{hostname}:{port}"}
        )
    host = f"[{hostname}]" if ":" in hostname else hostname
    given_port = f":{parts.port}" if parts.port else ""
    return f"{scheme}://{host}{given_port}{path}"


# --- which secrets a model call may read ---------------------------------------------


def key_variable_declared(name: str) -> bool:
    """Whether MODEL_API_KEY_VARIABLES names the variable: exactly, or by an entry
    ending in ``*`` that names its prefix (``K12VISTA_KEY_*``)."""
    for entry in settings.MODEL_API_KEY_VARIABLES:
        if entry.endswith("*") and len(entry) > 1 and name.startswith(entry[:-1]):
            return True
        if name == entry:
            return True
    return False


def check_key_variable(name: str) -> None:
    if name and not key_variable_declared(name):
        raise EndpointError(
            gettext(
                "the API key variable %(name)s is not one of MODEL_API_KEY_VARIABLES (%(declared)s); it is never "
                "read. An administrator declares key variables there."
            )
            % {"name": name, "declared": ", ".join(settings.MODEL_API_KEY_VARIABLES)}
        )


def _names(pattern: str, name: str) -> bool:
    """Whether a variable entry (an exact name, or a prefix ending in ``*``) names the variable."""
    if pattern.endswith("*") and len(pattern) > 1:
        return name.startswith(pattern[:-1])
    return name == pattern


def key_destinations(name: str) -> list[str]:
    """The MODEL_API_KEY_URLS entries the key in this variable may be sent to (none: nowhere)."""
    return [url for pattern, urls in settings.MODEL_API_KEY_URLS.items() if _names(pattern, name) for url in urls]


def check_key_destination(name: str, url: str) -> None:
    """Refuses (EndpointError) to send the key in ``name`` to ``url`` unless a MODEL_API_KEY_URLS
    entry bound to that variable admits it. Endpoints are shared and any researcher may edit one:
    without this, pointing an endpoint that names OPENAI_API_KEY at one's own server, inside the
    allowlist, would hand them the key with the first request."""
    if not name:
        return
    scheme, host, port, path = url_parts(url)
    destinations = key_destinations(name)
    if not any(parse_allowed_prefix(entry).admits(scheme, host, port, path) for entry in destinations):
        raise EndpointError(
            gettext(
                "the key in %(name)s may only be sent to %(urls)s (MODEL_API_KEY_URLS), not to %(server)s; "
                "an administrator binds key variables to their servers there"
            )
            % {"name": name, "urls": ", ".join(destinations) or gettext("no server (none is bound)"),
               "server": f"{scheme}://{host}:{port}"}
        )  # fmt: skip


def api_key(endpoint: ModelEndpoint) -> str:
    """The key, read at call time from the endpoint's declared variable; servers without
    auth accept any string. Refuses (EndpointError) a variable that is not declared, or
    whose key may not go to the endpoint's URL."""
    if not endpoint.api_key_env:
        return "no-key"
    check_key_variable(endpoint.api_key_env)
    check_key_destination(endpoint.api_key_env, endpoint.base_url)
    return os.environ.get(endpoint.api_key_env, "")


def key_state(endpoint: ModelEndpoint) -> str:
    """unused, undeclared, unbound (its key may not go to this URL), set or missing; an undeclared
    variable is never looked up."""
    if not endpoint.api_key_env:
        return "unused"
    if not key_variable_declared(endpoint.api_key_env):
        return "undeclared"
    if endpoint.kind == "openai":
        try:
            check_key_destination(endpoint.api_key_env, endpoint.base_url)
        except EndpointError:
            return "unbound"
    return "set" if os.environ.get(endpoint.api_key_env) else "missing"


def check_endpoint(endpoint: ModelEndpoint) -> None:
    """Everything a call needs from the endpoint's settings, before any request is made: each of
    its servers (the base URL and every replica) inside the allowlist and allowed the key."""
    check_key_variable(endpoint.api_key_env)
    for url in endpoint.server_urls():
        check_endpoint_url(url)
        check_key_destination(endpoint.api_key_env, url)


# --- building clients -----------------------------------------------------------------


def build_client(endpoint: ModelEndpoint, url: str | None = None) -> openai.AsyncOpenAI:
    """The one way to get a client for an endpoint: checked URL, declared key, no redirects,
    no proxy but ``MODEL_HTTP_PROXY`` (the environment's HTTP_PROXY would send prompts and
    keys to a host no setting named), and no retries inside the SDK (inference.calls retries and
    counts attempts). ``url`` picks one of the endpoint's servers (a replica); the base URL by default."""
    check_endpoint(endpoint)
    if url is not None and url not in endpoint.server_urls():
        raise EndpointError(gettext("%(url)s is not one of the endpoint's servers") % {"url": repr(url)})
    return openai.AsyncOpenAI(
        base_url=url or endpoint.base_url, api_key=api_key(endpoint) or "missing", timeout=endpoint.timeout_seconds,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(
            follow_redirects=False, trust_env=False, proxy=settings.MODEL_HTTP_PROXY
        ),
    )  # fmt: skip


def build_sync_client(endpoint: ModelEndpoint) -> openai.OpenAI:
    """``build_client`` for synchronous callers (OCR inside the PDF importer)."""
    check_endpoint(endpoint)
    return openai.OpenAI(
        base_url=endpoint.base_url, api_key=api_key(endpoint) or "missing", timeout=endpoint.timeout_seconds,
        max_retries=0,
        http_client=openai.DefaultHttpxClient(follow_redirects=False, trust_env=False, proxy=settings.MODEL_HTTP_PROXY),
    )  # fmt: skip


@overload
def make_client(endpoint: ModelEndpoint, *, sync: Literal[True], url: str | None = None) -> openai.OpenAI: ...
@overload
def make_client(
    endpoint: ModelEndpoint, *, sync: Literal[False] = False, url: str | None = None
) -> openai.AsyncOpenAI: ...
def make_client(
    endpoint: ModelEndpoint, *, sync: bool = False, url: str | None = None
) -> openai.AsyncOpenAI | openai.OpenAI:
    """The client every caller uses (runs, scoring, assist, splitting, panels, OCR); ``url`` picks
    one of the endpoint's servers for an asynchronous caller (inference.calls.Replicas)."""
    return build_sync_client(endpoint) if sync else build_client(endpoint, url)


def chat_request(*, model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    """The arguments of ``client.post(**...)`` for one chat completion: what
    ``chat.completions.create`` sends (same path, bearer key, headers and the
    client's timeout, through the client's own transport: no redirects, no
    environment proxy), with the body we built sent as it is. The bearer key
    only, as create() asks: the SDK's default options also allow its admin key,
    which it reads from OPENAI_ADMIN_KEY, a variable nobody declared.

    ``create()`` walks the TypedDict annotations of every message to transform
    the body, 0.37 ms of CPU per request for a system and a user message
    (bench/inference_overhead.py); our bodies are plain JSON already (strings,
    numbers, the response_format dicts), which that transform leaves unchanged."""
    return {
        "path": "/chat/completions",
        "body": {"model": model, "messages": messages, **params},
        "cast_to": ChatCompletion,
        "options": {"security": {"bearer_auth": True}},
    }


@dataclass(frozen=True)
class Completion:
    text: str
    latency_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    attempts: int


def image_data_url(content: bytes, *, max_side: int) -> str:
    """A figure as a JPEG data URL, shrunk on our side to the endpoint's largest side."""
    image = Image.open(io.BytesIO(content)).convert("RGB")
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def build_messages(*, system: str, user: str, image_urls: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The text before the figures: the prompts put their fixed instructions first and the item's own
    parts last, so requests of a run share a long prefix a server's prefix cache reuses; a figure
    first would end that prefix at the system prompt (bench/prefix_share.py)."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    if image_urls:
        parts: list[dict[str, Any]] = [{"type": "text", "text": user}]
        parts.extend({"type": "image_url", "image_url": {"url": url}} for url in image_urls)
        messages.append({"role": "user", "content": parts})
    else:
        messages.append({"role": "user", "content": user})
    return messages


# Where the reference record's question text has its figure.
IMAGE_MARK = "<image>"


def stored_image_url(content_base64: str) -> dict[str, Any]:
    """An ``image_url`` part for a figure sent as stored (the reference protocol): the JPEG's own
    bytes, never shrunk or re-encoded here, with ``detail: high`` as the reference asks."""
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{content_base64}", "detail": "high"}}


def reference_messages(text: str, images: list[dict[str, Any]] | dict[str, Any] | None) -> list[dict[str, Any]]:
    """One user message and no system message, as the reference judge builds it: the text up to
    the first ``<image>``, the figures, then the text after it. The reference keeps only the text
    up to a second mark and drops the rest (the student's answer with it); here the rest is kept,
    its marks removed. Text without a mark gets the figures first, as the reference's answering
    models do; without a figure the message is the text alone, marks removed. The reference's
    record holds one figure; a question of the studio with several sends every one of them, in
    order, where the reference sends its one (docs/formats.md)."""
    figures = [images] if isinstance(images, dict) else list(images or [])
    if not figures:
        return [{"role": "user", "content": text.replace(IMAGE_MARK, "")}]
    before, mark, after = text.partition(IMAGE_MARK)
    if not mark:
        parts = [*figures, {"type": "text", "text": text}]
    else:
        parts = [{"type": "text", "text": before}, *figures, {"type": "text", "text": after.replace(IMAGE_MARK, "")}]
    return [{"role": "user", "content": parts}]


def redirect_target(exc: Exception) -> str | None:
    """Where a 3xx answer pointed, when the call failed because we do not follow it."""
    if isinstance(exc, openai.APIStatusError) and 300 <= exc.status_code < 400:
        return exc.response.headers.get("location", "") or "(no Location header)"
    return None


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in TRANSIENT_STATUS


def describe(exc: Exception) -> str:
    target = redirect_target(exc)
    if target is not None:
        status = exc.status_code  # type: ignore[attr-defined]
        return f"HTTP {status}: the server redirected to {target}; model calls never follow redirects"[:2000]
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, str | dict) else ""
        return f"HTTP {exc.status_code}: {body or exc.message}"[:2000]
    return f"{type(exc).__name__}: {exc}"[:2000]


# --- a server that does not answer at all -------------------------------------------

# Why a request never reached the model, as people read it.
CONNECTION_CAUSES = {
    "refused": gettext_lazy("connection refused"),
    "dns": gettext_lazy("the host name could not be resolved"),
    "tls": gettext_lazy("the TLS handshake failed"),
    "connect_timeout": gettext_lazy("the connection timed out"),
    "connect": gettext_lazy("the connection could not be opened"),
    "disconnected": gettext_lazy("the server closed the connection without answering"),
}


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain and len(chain) < 20:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def connection_failure(exc: BaseException) -> str | None:
    """Why a call never reached the server (a key of CONNECTION_CAUSES), or None
    when it did: any HTTP answer (a 4xx or 5xx is about one question), and a read
    timeout (the server took the request; the model is slow)."""
    if not isinstance(exc, openai.APIConnectionError):
        return None
    chain = _causes(exc)
    for cause in chain:
        if isinstance(cause, ConnectionRefusedError):
            return "refused"
        if isinstance(cause, socket.gaierror):
            return "dns"
        if isinstance(cause, ssl.SSLError):
            return "tls"
        if isinstance(cause, httpx2.ConnectTimeout):
            return "connect_timeout"
    for cause in chain:
        if isinstance(cause, httpx2.ConnectError):
            return "connect"
        if isinstance(cause, httpx2.ReadError | httpx2.WriteError | httpx2.RemoteProtocolError):
            return "disconnected"
    return None


UNREACHABLE = "inference.endpoint_unreachable"


@failure_wording(UNREACHABLE)
def unreachable_message(params: dict[str, Any]) -> str:
    cause = CONNECTION_CAUSES.get(params["cause"], params["cause"])
    text = _("Cannot reach the model server %(url)s: %(cause)s.") % {"url": params["url"], "cause": cause}
    if params.get("count"):
        text += " " + _(
            "The run stopped after %(count)s failed connections in a row; the questions not answered yet stay "
            "pending, and a retry once the server is up resumes the run."
        ) % {"count": params["count"]}
    return text


class EndpointUnreachable(JobFailure):
    """Raised by inference.calls once an endpoint failed to connect too many times in
    a row: the run stops with this message instead of failing every question."""

    def __init__(self, *, url: str, cause: str, count: int) -> None:
        super().__init__(UNREACHABLE, {"url": url, "cause": cause, "count": count})


# --- "test connection" ----------------------------------------------------------------

PROBE_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Probe:
    """What testing an endpoint found. ``ok`` is None when no call is possible from
    here (the offline engines load in a worker); ``message`` is in the reader's language."""

    ok: bool | None
    message: str
    latency_ms: int | None = None
    model: str = ""
    model_path_exists: bool | None = None


def probe_endpoint(endpoint: ModelEndpoint) -> Probe:
    """One tiny chat request (one token) through the client every call uses (the
    allowlist, the declared key, no redirects), with no retries and no slot: a
    test answers at once, even while runs hold all of the endpoint's slots."""
    if endpoint.kind != "openai":
        return probe_local(endpoint)
    try:
        api = make_client(endpoint, sync=True)
    except EndpointError as exc:
        return Probe(ok=False, message=str(exc))
    started = time.perf_counter()
    try:
        reply = api.with_options(timeout=min(endpoint.timeout_seconds, PROBE_TIMEOUT_SECONDS)).chat.completions.create(
            model=endpoint.model_name, messages=[{"role": "user", "content": "ping"}], max_tokens=1
        )
    except openai.APIError as exc:
        latency = round((time.perf_counter() - started) * 1000)
        cause = connection_failure(exc)
        if cause is not None:
            return Probe(ok=False, latency_ms=latency,
                         message=unreachable_message({"url": endpoint.base_url, "cause": cause}))  # fmt: skip
        if isinstance(exc, openai.APITimeoutError):
            message = _("The server took the request but gave no answer within %(seconds)s s.") % {
                "seconds": min(endpoint.timeout_seconds, PROBE_TIMEOUT_SECONDS)
            }
            return Probe(ok=False, latency_ms=latency, message=message)
        return Probe(ok=False, latency_ms=latency,
                     message=_("The server answered with an error: %(error)s") % {"error": describe(exc)})  # fmt: skip
    finally:
        api.close()
    latency = round((time.perf_counter() - started) * 1000)
    model = str(getattr(reply, "model", "") or endpoint.model_name)[:200]
    return Probe(ok=True, latency_ms=latency, model=model,
                 message=_("The model %(model)s answered in %(ms)s ms.") % {"model": model, "ms": latency})  # fmt: skip


def model_path_in_models_folder(name: str) -> Path | None:
    """The model path ``name`` when it lies inside MODEL_FILES_DIR, else None (a path outside it,
    or a name that is no absolute path, such as a hub id the worker downloads). Decided on the
    text first, so that a path outside is never looked up; then again after following links, so
    a link cannot lead out."""
    root = Path(os.path.normpath(Path(settings.MODEL_FILES_DIR).expanduser().absolute()))
    try:
        path = Path(os.path.normpath(Path(name).expanduser())) if name else None
        if path is None or not path.is_absolute() or not path.is_relative_to(root):
            return None
        return path if path.resolve().is_relative_to(root.resolve()) else None
    except (OSError, ValueError, RuntimeError):  # a name no file system accepts (NUL, too long), a link loop
        return None


def probe_local(endpoint: ModelEndpoint) -> Probe:
    """The offline engines (vLLM, transformers) load the model inside a worker, so no
    request can be sent from here; what can be checked is whether the model path exists,
    and only inside the models folder: "Test connection" must not tell anyone whether any
    other path exists on this server (the server account's ~/.ssh, say)."""
    engine = _("This engine loads the model inside a worker, so there is no server to call; a run is the test.")
    path = model_path_in_models_folder(endpoint.model_name)
    if path is None:
        outside = _("Only model paths inside the models folder (MODEL_FILES_DIR) are checked from here.")
        return Probe(ok=None, model_path_exists=None, message=f"{engine} {outside}")
    try:
        exists = path.exists()
    except (OSError, ValueError):
        exists = False
    if exists:
        found = _("The model path exists on this server.")
    else:
        found = _(
            "The model path was not found on this server: it may be a model name the worker downloads, or a "
            "path that exists only on the workers."
        )
    return Probe(ok=None, model_path_exists=exists, message=f"{engine} {found}")
