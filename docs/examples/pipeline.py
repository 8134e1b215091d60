#!/usr/bin/env python3
"""The whole pipeline through the REST API, as a lab's script drives it (issue 29).

    python docs/examples/pipeline.py --base-url http://127.0.0.1:8000 --token $RESEARCHER_TOKEN \\
        --inspector-token $INSPECTOR1 --inspector-token $INSPECTOR2 --inspector-token $INSPECTOR3 \\
        --questions bank.jsonl --model-url http://127.0.0.1:9000 --model student --judge judge

Stages: import questions (JSONL), create the endpoints, run the model step by step, score the run,
draw a candidate set, audit it (each inspector rates their own items), release it, PEM-800K (chains
from the run, labels from the scoring, a filter run, an export) and train a PEM on the export
(``--skip-training`` where the server has no training environment). Every stage that takes time
answers with a job; the script follows ``/api/jobs/<id>/`` until it has finished and prints what
the stage made. Only ``httpx`` (``httpx2``); :func:`main` returns what each stage made.

The draw takes the questions whose solutions are corrected: with ``--annotator-token`` the imported
questions go through the annotators' stages (OCR review, step correction) through the API here, each
question claimed from the queue narrowed to the import, accepted as imported, and its steps submitted;
without it, annotators work through them on the pages first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx  # httpx's maintained fork, which the studio itself requires; plain httpx works the same

FINISHED = {"succeeded", "failed", "cancelled"}


class Api:
    """One role's token; every reply is checked and decoded."""

    def __init__(self, base_url: str, token: str, *, every: float):
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Token {token}"}, timeout=60)
        self.every = every

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        reply = self.http.request(method, path, **kwargs)
        if reply.status_code >= 400:
            raise RuntimeError(f"{method} {path}: HTTP {reply.status_code} {reply.text[:2000]}")
        return reply.json() if reply.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def post(self, path: str, data: dict | None = None, **kwargs: Any) -> Any:
        return self.call("POST", path, json=data, **kwargs) if data is not None else self.call("POST", path, **kwargs)

    def download(self, path: str, sha256: str, size: int | None = None) -> int:
        """Streams a file the pages offer (the token is accepted there as in the API), checking its SHA-256
        and, where the studio gives it, its size; returns the number of bytes."""
        digest, got = hashlib.sha256(), 0
        with self.http.stream("GET", path) as reply:
            if reply.status_code != 200:
                raise RuntimeError(f"GET {path}: HTTP {reply.status_code}, not the file")
            for chunk in reply.iter_bytes():
                digest.update(chunk)
                got += len(chunk)
        if (size is not None and got != size) or digest.hexdigest() != sha256:
            raise RuntimeError(f"GET {path}: {got} bytes, SHA-256 {digest.hexdigest()}; expected {size}, {sha256}")
        return got

    def wait(self, job: dict | int, timeout: float = 3600) -> dict:
        """Polls the job until it has finished; a job that did not succeed stops the script."""
        job = self.get(f"/api/jobs/{job}/") if isinstance(job, int) else job
        deadline = time.monotonic() + timeout
        while job["status"] not in FINISHED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job['id']} still {job['status']} after {timeout:.0f} s")
            time.sleep(self.every)
            job = self.get(f"/api/jobs/{job['id']}/")
        if job["status"] != "succeeded":
            raise RuntimeError(f"job {job['id']} {job['status']}: {job.get('error')}")
        return job


def endpoint(api: Api, name: str, base_url: str) -> dict:
    """The endpoint of that name (following the list's pages), created if the studio has none yet."""
    page: str | None = "/api/endpoints/"
    while page:
        listed = api.get(page)
        for found in listed["results"]:
            if found["name"] == name:
                return found
        page = listed.get("next")  # an absolute link: httpx follows it whatever the base URL
    return api.post("/api/endpoints/", {"name": name, "base_url": base_url, "model_name": name})


TASKS = ("ocr_review", "step_correction")


def work_through(annotator: Api, task: str, document: int) -> int:
    """Claims the task's questions of one import until none is left (204), accepting each as it reads: a lab
    reviews here what it must (``/api/work/<id>/save/`` with the version read; a 409 says someone saved
    first). Returns how many were accepted."""
    accepted = 0
    while True:
        work = annotator.post("/api/work/claim/", {"task": task, "document": document})
        if work is None:  # 204: nothing of this import is waiting for the task
            return accepted
        annotator.post(f"/api/work/{work['id']}/accept/", {"version": work["question"]["version"]})
        accepted += 1


def run_pipeline(args: argparse.Namespace, log: Any = print) -> dict:
    api = Api(args.base_url, args.token, every=args.every)
    inspectors = [Api(args.base_url, token, every=args.every) for token in args.inspector_token]
    filters = dict(item.split("=", 1) for item in args.filter)
    made: dict[str, Any] = {}

    # 1. Import questions.
    with Path(args.questions).open("rb") as bank:
        document = api.post("/api/imports/questions/", files={"file": (Path(args.questions).name, bank)})
    api.wait(document["job"])
    made["import"] = document = api.get(f"/api/imports/{document['id']}/")
    log(f"import {document['id']}: {document['questions']} questions")

    # 1b. The annotators' stages, through the API: each imported question claimed, read and accepted.
    if args.annotator_token:
        annotator = Api(args.base_url, args.annotator_token, every=args.every)
        made["work"] = {task: work_through(annotator, task, document["id"]) for task in TASKS}
        log(f"annotator: {made['work']}")

    # 2. Endpoints, an inference run and its scoring.
    student, judge = endpoint(api, args.model, args.model_url), endpoint(api, args.judge, args.model_url)
    run = api.post("/api/runs/", {"endpoint": student["id"], "mode": "step_by_step", "filters": filters})
    api.wait(run["job"])
    made["run"] = run = api.get(f"/api/runs/{run['id']}/")
    log(f"inference run {run['id']}: {run['counts']}")
    scoring = api.post(f"/api/runs/{run['id']}/scoring/", {"judge": judge["id"]})
    api.wait(scoring["job"])
    made["scoring"] = scoring = api.get(f"/api/scoring/{scoring['id']}/")
    log(f"scoring run {scoring['id']}: {scoring['coverage']}")

    # 3. A draw, its audit (each inspector rates their own items) and the release.
    draw = api.post("/api/benchmark/draws/", {"targets": {"per_cell": args.per_cell, "cover_knowledge": False},
                                              "seed": args.seed})  # fmt: skip
    api.wait(draw["job"])
    made["draw"] = draw = api.get(f"/api/benchmark/draws/{draw['id']}/")
    log(f"draw {draw['id']}: {draw['report']['total']} questions")
    names = [inspector.get("/api/me/")["username"] for inspector in inspectors]
    lead = inspectors[0]  # inspectors open audits and decide them
    audit = lead.post("/api/inspect/audits/", {
        "name": f"audit of draw {draw['id']}", "population": {"kind": "candidate_set", "candidate_set": draw["id"]},
        "aql": args.aql, "seed": args.seed, "inspectors": names,
    })  # fmt: skip
    if "id" not in audit:  # a large population: a job draws the sample
        audit = lead.get(f"/api/inspect/audits/{lead.wait(audit['job'])['result']['audit']}/")
    for inspector in inspectors:
        for item in inspector.get("/api/inspect/my-items/", pending="true", audit=audit["id"])["results"]:
            inspector.post(item["rating_url"], {"verdicts": dict.fromkeys(item["dimensions"], True)})
    made["decision"] = decision = lead.post(f"/api/inspect/audits/{audit['id']}/decide/")
    log(f"audit {audit['id']}: lots {[lot.get('decision') for lot in decision['lots']]}")
    release = api.post(f"/api/benchmark/draws/{draw['id']}/release/", {})
    api.wait(release["job"])
    made["release"] = release = api.post(f"/api/benchmark/releases/v{release['version']}/publish/")
    log(f"release v{release['version']}: {release['release_status']}, files {[f['form'] for f in release['files']]}")
    made["release_files"] = {
        f["form"]: api.download(f"/annotate/benchmark/releases/v{release['version']}/files/{f['form']}/", f["sha256"],
                                f["size"])
        for f in release["files"]
    }  # fmt: skip

    # 4. PEM-800K: chains from the run, the judge's labels from the scoring, a filter run and an export.
    api.wait(api.post("/api/pem/data/from-run/", {"inference_run": run["id"]})["id"])
    api.wait(api.post("/api/pem/data/from-scoring/", {"scoring_run": scoring["id"]})["id"])
    filtered = api.post(
        "/api/pem/training/filter-runs/",
        {"source": "model", "rater": judge["name"], "params": {"coverage": {"min_models": args.min_models}}},
    )
    api.wait(filtered["job"])
    made["filter_run"] = filtered = api.get(f"/api/pem/training/filter-runs/{filtered['id']}/")
    removed = {stage: count["chains"] for stage, count in filtered["funnel"].items() if "remaining_chains" in count}
    log(
        f"filter run {filtered['id']}: kept {filtered['kept']} of {filtered['funnel']['input']['chains']} chains, "
        f"removed {removed}"
    )
    export = api.post("/api/pem/training/exports/", {"filter_run": filtered["id"]})
    api.wait(export["job"])
    made["export"] = export = api.get(f"/api/pem/training/exports/{export['id']}/")
    log(f"export {export['id']}: {export['status']}, files {sorted(export['files'])}")
    # The export's own files (the formats, the datasheet, the manifest), each checked against the manifest; the
    # images under images/ download alike.
    made["export_files"] = {
        name: api.download(f"/pem/training/exports/{export['id']}/files/{name}", digest)
        for name, digest in export["files"].items() if "/" not in name
    }  # fmt: skip

    # 5. Training a PEM on the export (needs the server's training environment).
    if args.base_model and not args.skip_training:
        trained = api.post("/api/pem/training/runs/", {"export": export["id"], "base_model": args.base_model,
                                                       "hyperparameters": args.hyperparameters})  # fmt: skip
        api.wait(trained["job"], timeout=86400)
        made["training"] = trained = api.post(f"/api/pem/training/runs/{trained['id']}/endpoint/", {"name": args.pem})
        log(
            f"training run {trained['id']}: {trained['status']}, checkpoint {trained['checkpoint']}, "
            f"registered as endpoint {args.pem!r}; to serve it elsewhere: {trained['vllm_serve']}"
        )
    return made


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--token", required=True, help="a researcher's API token (the account page makes one)")
    p.add_argument("--inspector-token", action="append", default=[], help="one per inspector of the audit")
    p.add_argument("--annotator-token", default="", help="an annotator's token: the imported questions' OCR "
                   "review and step correction through the API")  # fmt: skip
    p.add_argument("--questions", required=True, help="a JSONL file of questions")
    p.add_argument("--model-url", required=True, help="the OpenAI-compatible server of the model and the judge")
    p.add_argument("--model", default="student")
    p.add_argument("--judge", default="judge")
    p.add_argument("--per-cell", type=int, default=5, help="questions drawn per subject/grade/type cell")
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="which questions the model answers: subject, grade, stage, qtype or status",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--aql", type=float, default=1.0, help="the audit's acceptance quality limit (%%)")
    p.add_argument("--min-models", type=int, default=1, help="PEM-800K coverage: models that answered a question")
    p.add_argument("--base-model", default="", help="the model the PEM is trained from (a path on the server)")
    p.add_argument("--hyperparameters", type=json.loads, default={}, help='JSON, e.g. {"max_steps": 100}')
    p.add_argument("--pem", default="pem", help="the name of the endpoint the trained checkpoint is registered as")
    p.add_argument("--skip-training", action="store_true")
    p.add_argument("--every", type=float, default=5, help="seconds between two polls of a job")
    return p


def main(argv: list[str] | None = None) -> dict:
    return run_pipeline(parser().parse_args(argv))


if __name__ == "__main__":
    try:
        main()
    except (RuntimeError, TimeoutError, httpx.HTTPError) as exc:
        sys.exit(str(exc))
