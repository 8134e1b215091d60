#!/usr/bin/env python3
"""Stage 9 of the pipeline through the REST API: evaluate a model.

Starts an inference run over a question filter, waits for its job, starts a
scoring run with a judge, waits for that, and prints the leaderboard. Only
the standard library; a researcher's or an administrator's API token (the
account page makes one).

    python docs/api/evaluate.py --base-url http://127.0.0.1:8000 --token $K12VISTA_TOKEN \\
        --model-endpoint 3 --judge-endpoint 4 --mode step_by_step --filter subject=math --filter grade=8

An endpoint is given by id or by name; ``--new-endpoint name=...,base_url=...,model_name=...``
creates one first (the server checks the address against its allowlist).

The work is in :func:`evaluate`, which takes any client with ``get(path)`` and
``post(path, data)`` returning the decoded JSON (and raising :class:`ApiError`
on a refusal); the tests drive it with Django's test client.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

FINISHED = {"succeeded", "failed", "cancelled"}


class ApiError(RuntimeError):
    def __init__(self, status: int, body: Any):
        super().__init__(f"HTTP {status}: {json.dumps(body, ensure_ascii=False)[:2000]}")
        self.status, self.body = status, body


class Client(Protocol):
    def get(self, path: str) -> Any: ...

    def post(self, path: str, data: dict) -> Any: ...


class UrllibClient:
    """The API over HTTP with token authentication."""

    def __init__(self, base_url: str, token: str, timeout: float = 60):
        self.base_url, self.token, self.timeout = base_url.rstrip("/"), token, timeout

    def _call(self, method: str, path: str, data: dict | None = None) -> Any:
        body = None if data is None else json.dumps(data).encode()
        request = urllib.request.Request(self.base_url + path, data=body, method=method)  # noqa: S310
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:  # noqa: S310 (the caller's URL)
                raw = reply.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                detail = json.loads(raw)
            except ValueError:
                detail = raw.decode(errors="replace")
            raise ApiError(exc.code, detail) from None
        return json.loads(raw) if raw else None

    def get(self, path: str) -> Any:
        return self._call("GET", path)

    def post(self, path: str, data: dict) -> Any:
        return self._call("POST", path, data)


def find_endpoint(client: Client, wanted: str | int) -> dict:
    """An endpoint by id or by name, following the cursor pages."""
    path: str | None = "/api/endpoints/"
    while path:
        page = client.get(path)
        for endpoint in page["results"]:
            if str(endpoint["id"]) == str(wanted) or endpoint["name"] == wanted:
                return endpoint
        path = relative(page.get("next"))
    raise SystemExit(f"no endpoint {wanted!r}")


def relative(url: str | None) -> str | None:
    """A ``next`` link without its scheme and host, so that any client can follow it."""
    if not url:
        return None
    start = url.find("/api/")
    return url[start:] if start >= 0 else url


def wait_for_job(
    client: Client, job: dict, *, sleep: Callable[[float], Any] = time.sleep, every: float = 5, timeout: float = 86400,
    log: Callable[[str], Any] = print,
) -> dict:  # fmt: skip
    """Polls /api/jobs/<id>/ until the job has finished; raises unless it succeeded."""
    deadline = time.monotonic() + timeout
    while job["status"] not in FINISHED:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job['id']} still {job['status']} after {timeout:.0f} s")
        sleep(every)
        job = client.get(f"/api/jobs/{job['id']}/")
        log(f"  job {job['id']} {job['status']} {job['done']}/{job['total'] or '?'}")
    if job["status"] != "succeeded":
        raise RuntimeError(f"job {job['id']} {job['status']}: {job.get('error')}")
    return job


def evaluate(
    client: Client, *, model: str | int, judge: str | int, mode: str = "step_by_step", filters: dict | None = None,
    params: dict | None = None, name: str = "", sleep: Callable[[float], Any] = time.sleep, every: float = 5,
    log: Callable[[str], Any] = print,
) -> dict:  # fmt: skip
    """Runs stage 9 and returns what it did: the inference run, the scoring run
    and the leaderboard document (``/api/leaderboard/?mode=...``)."""
    model_endpoint, judge_endpoint = find_endpoint(client, model), find_endpoint(client, judge)
    run = client.post("/api/runs/", {
        "endpoint": model_endpoint["id"], "mode": mode, "filters": filters or {}, "params": params or {}, "name": name,
    })  # fmt: skip
    log(f"inference run {run['id']} ({run['name']}), job {run['job']['id']}")
    wait_for_job(client, run["job"], sleep=sleep, every=every, log=log)
    run = client.get(f"/api/runs/{run['id']}/")
    log(f"answers: {run['counts']}")

    scoring_run = client.post(f"/api/runs/{run['id']}/scoring/", {"judge": judge_endpoint["id"]})
    log(f"scoring run {scoring_run['id']} ({scoring_run['method']}), job {scoring_run['job']['id']}")
    wait_for_job(client, scoring_run["job"], sleep=sleep, every=every, log=log)
    scoring_run = client.get(f"/api/scoring/{scoring_run['id']}/")
    log(f"judgments: {scoring_run['coverage']}")

    board = client.get(f"/api/leaderboard/?mode={mode}")
    return {"inference_run": run, "scoring_run": scoring_run, "leaderboard": board}


def board_lines(board: dict) -> list[str]:
    """The leaderboard as text: each model's overall mean with its interval and how many questions it rests on."""
    lines = [f"{'model':<40} {'mode':<13} {'overall':>8} {'95% CI':>17} {'n':>7}"]
    for entry in board["entries"]:
        cell = entry["cells"].get("overall") or {}
        mean = cell.get("mean")
        low, high = cell.get("ci_low"), cell.get("ci_high")
        shown = f"{100 * mean:7.1f}%" if mean is not None else f"{'-':>8}"
        interval = f"[{100 * low:5.1f}, {100 * high:5.1f}]" if low is not None and high is not None else "-"
        lines.append(f"{entry['model']:<40} {entry['mode']:<13} {shown} {interval:>17} {cell.get('n', 0):>7}")
    lines.extend(f"(waiting: run {w['inference_run']} {w['model']}, no finished scoring run yet)"
                 for w in board.get("waiting", []))  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="an API token of a researcher or administrator")
    parser.add_argument("--model-endpoint", required=True, help="the model to evaluate: endpoint id or name")
    parser.add_argument("--judge-endpoint", required=True, help="the judge: endpoint id or name")
    parser.add_argument("--mode", choices=["direct", "step_by_step"], default="step_by_step")
    parser.add_argument("--filter", action="append", default=[], metavar="FIELD=VALUE",
                        help="subject, grade, stage, qtype or status; repeat for several")  # fmt: skip
    parser.add_argument("--new-endpoint", action="append", default=[], metavar="name=..,base_url=..,model_name=..",
                        help="create this endpoint first (other fields as in POST /api/endpoints/)")  # fmt: skip
    parser.add_argument("--name", default="", help="the inference run's name")
    parser.add_argument("--every", type=float, default=5, help="seconds between polls")
    args = parser.parse_args(argv)
    client = UrllibClient(args.base_url, args.token)
    filters = dict(item.split("=", 1) for item in args.filter)
    try:
        for spec in args.new_endpoint:
            fields = dict(part.split("=", 1) for part in spec.split(","))
            created = client.post("/api/endpoints/", fields)
            print(f"endpoint {created['id']} ({created['name']}) created", file=sys.stderr)
        done = evaluate(client, model=args.model_endpoint, judge=args.judge_endpoint, mode=args.mode,
                        filters=filters, name=args.name, every=args.every,
                        log=lambda line: print(line, file=sys.stderr))  # fmt: skip
    except (ApiError, urllib.error.URLError, RuntimeError, TimeoutError) as exc:
        print(exc, file=sys.stderr)
        return 1
    print("\n".join(board_lines(done["leaderboard"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
