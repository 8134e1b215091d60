"""PEBench releases: immutable, versioned snapshots of PEBench's items with their gold
labels and the agreement report, through the life cycle every release goes through
(``k12vista.releases``: numbering, the build job's frame, publishing, immutability, comparing);
this module adds what a PEBench release holds and checks.

A job (``pem.build_pebench_release``) snapshots every PEBench item (the export's
records: steps, gold labels and every other label, and the reference record
where every step has gold) into ``PEBenchReleaseItem`` rows, computes the
agreement report over the items and writes one zip from the snapshot:
``pebench-reference.jsonl``, ``pebench.jsonl``, ``agreement.json`` and
``manifest.json`` with each file's SHA-256. It records a fingerprint of
PEBench's labels when it started; publishing a draft whose labels changed since
is refused, so a published release holds exactly what it says. Published, the
release never changes; two releases can be compared (items added, removed,
and changed with a diff of their steps and gold labels).

The release's pages and file hold the labels of many items, so they follow the
blind rule as a whole (``labelling.may_read_label_files``): never to an
annotator, nor to anyone holding an unsubmitted labelling task.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count, Max
from django.utils.translation import gettext

from annotation import statistics
from k12vista import releases
from k12vista.job_shapes import ReleaseParams
from k12vista.jobs import Progress, job_handler
from k12vista.models import Job
from k12vista.releases import ReleaseError, field_diff
from k12vista.roles import Role, has_role
from pem import export, labelling
from pem.agreement_store import plain
from pem.job_shapes import PebenchReleaseBuilt
from pem.models import ChainOfThought, PEBenchItem, PEBenchRelease, PEBenchReleaseItem, StepLabel
from pem.reports import agreement_report

BUILD = "pem.build_pebench_release"
CHUNK = 200
READERS = (Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)


# The name pem's callers and tests know for the one release error.
PEBenchReleaseError = ReleaseError


def may_read(user: Any) -> bool:
    """Who reads PEBench releases (pages, files, API): readers of all labels with no open task."""
    return any(has_role(user, role) for role in READERS) and labelling.may_read_label_files(user)


def may_build(user: Any) -> bool:
    return (has_role(user, Role.RESEARCHER) or has_role(user, Role.ADMIN)) and may_read(user)


def fingerprint() -> dict:
    """PEBench's membership and labels as they are now. The labels are hashed whole (a gold
    label corrected in place keeps its id and count): about 130,000 short rows at PEBench's
    size, read once when a build starts, again when it ends, and at publishing."""
    labels = StepLabel.objects.filter(step__cot__pebench_item__isnull=False).order_by("id")
    digest = hashlib.sha256()
    count = 0
    for row in labels.values_list("id", "step_id", "source", "rater", "label", "explanation").iterator(chunk_size=5000):
        digest.update(repr(row).encode("utf-8"))
        count += 1
    members = PEBenchItem.objects.order_by().aggregate(n=Count("id"), last=Max("id"))
    return {"labels": count, "labels_sha256": digest.hexdigest(), "items": members}


def content_hash(content: dict) -> str:
    encoded = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


# --- building ------------------------------------------------------------------------------


def start_release(*, by: Any, name: str = "") -> PEBenchRelease:
    """The next version as a draft being built, and the job that builds it."""
    chains = export.pebench_chains()
    if not chains.exists():
        raise PEBenchReleaseError(gettext("PEBench has no items yet; build it first"))
    try:
        export.check_not_training_data(chains)
    except export.ExportError as exc:
        raise PEBenchReleaseError(str(exc)) from exc
    return releases.start(PEBenchRelease, by=by, kind=BUILD, title="pebench_release", name=name,
                          default_name="PEBench v{version}")  # fmt: skip


def snapshot(release: PEBenchRelease, progress: Progress | None = None) -> int:
    """The release's items from PEBench as it is now (from scratch: a rerun gives the same rows)."""
    chains = export.pebench_chains()
    total = chains.count()
    release.items.all().delete()
    batch: list[PEBenchReleaseItem] = []
    done = 0
    for cot in export.streamed(chains):
        content = {"studio": export.studio_record(cot), "reference": export.reference_record(cot)}
        batch.append(PEBenchReleaseItem(release=release, cot=cot, key=cot.key, content_hash=content_hash(content),
                                        content=content))  # fmt: skip
        if len(batch) >= CHUNK:
            PEBenchReleaseItem.objects.bulk_create(batch)
            done += len(batch)
            batch = []
            if progress:
                progress(done, total * 2)
    PEBenchReleaseItem.objects.bulk_create(batch)
    return done + len(batch)


def summarize(release: PEBenchRelease) -> dict:
    gold: Counter[str] = Counter()
    items = steps = reference = 0
    for content in release.items.values_list("content", flat=True).iterator(chunk_size=CHUNK):
        items += 1
        reference += content["reference"] is not None
        for step in content["studio"]["steps"]:
            steps += 1
            if step["label"]:
                gold[step["label"]] += 1
    references = (c["reference"] for c in release.items.values_list("content", flat=True).iterator(chunk_size=CHUNK))
    table_3 = statistics.table_3_pebench(record for record in references if record is not None)
    people = release.agreement.get("people", {})
    judges = release.agreement.get("judges", [])
    return {
        "items": items, "steps": steps, "reference_items": reference, "items_without_gold": items - reference,
        "gold_labels": dict(sorted(gold.items())),
        # The paper's Table 3 rows for PEBench, over the items with gold on every step (the reference file's).
        "statistics": table_3,
        "agreement": {
            "cohen_kappa": people.get("cohen_kappa", {}).get("value"),
            "krippendorff_alpha": people.get("krippendorff_alpha", {}).get("value"),
            "gwet_ac1": people.get("gwet_ac1", {}).get("value"),
            "judges": [{"rater": j["rater"], "accuracy": j.get("accuracy", {}).get("value")} for j in judges],
        },
    }  # fmt: skip


def release_dir() -> Path:
    return Path(settings.MEDIA_ROOT) / "releases" / "pebench"


def write_zip(release: PEBenchRelease) -> Path:
    """The release's zip, from its snapshot (never from PEBench as it is now)."""
    base = release_dir()
    base.mkdir(parents=True, exist_ok=True)
    out = base / f"pebench-v{release.version}.zip"
    partial = out.with_name(out.name + ".partial")
    items = release.items.order_by("key")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            hashes = {}
            for name, part in (("pebench-reference.jsonl", "reference"), ("pebench.jsonl", "studio")):
                digest = hashlib.sha256()
                with archive.open(name, "w") as out_file:  # one entry at a time: a zip has one writer
                    for content in items.values_list("content", flat=True).iterator(chunk_size=CHUNK):
                        if content[part] is not None:
                            line = export.json_line(content[part])
                            out_file.write(line)
                            digest.update(line)
                hashes[name] = digest.hexdigest()
            agreement = json.dumps(release.agreement, ensure_ascii=False, indent=2).encode("utf-8")
            archive.writestr("agreement.json", agreement)
            hashes["agreement.json"] = hashlib.sha256(agreement).hexdigest()
            manifest = {
                "format": "k12vista-pebench-release", "format_version": 1, "release": release.version,
                "name": release.name, "studio_commit": release.studio_commit, "built": release.created.isoformat(),
                **release.summary, "files": hashes,
            }  # fmt: skip
            archive.writestr("manifest.json", json.dumps(manifest, ensure_ascii=False, indent=2))
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


@job_handler(BUILD, queue=Job.Queue.CPU, params=ReleaseParams, result=PebenchReleaseBuilt)
def build_release_job(job: Job, progress: Progress) -> dict:
    def work(release: PEBenchRelease) -> tuple[dict, dict]:
        seen = fingerprint()
        count = snapshot(release, progress)
        chains = ChainOfThought.objects.filter(pk__in=release.items.values("cot_id"))
        release.agreement = plain(agreement_report(chains))
        release.summary = summarize(release)
        release.fingerprint = seen
        release.save(update_fields=["agreement", "summary", "fingerprint"])
        path = write_zip(release)
        if fingerprint() != seen:
            raise ReleaseError(gettext("PEBench's labels changed while the release was built; build it again"))
        progress(count * 2, count * 2)
        return {"release": release.pk, "version": release.version, "items": count}, releases.checksummed(path)

    return releases.build(PEBenchRelease, job, work)


# --- publishing and comparing ------------------------------------------------------------


def publish_release(*, release: PEBenchRelease, by: Any) -> PEBenchRelease:
    def unchanged(release: PEBenchRelease) -> None:
        if fingerprint() != release.fingerprint:
            raise ReleaseError(
                gettext("PEBench's items or labels changed since this draft was built; build a new release")
            )

    return releases.publish(release, by=by, check=unchanged)


def step_lines(content: dict) -> list[str]:
    """An item's steps as the diff reads them: position, gold label, text, explanation."""
    lines = []
    for step in content["studio"]["steps"]:
        why = f" — {step['explanation']}" if step["explanation"] else ""
        lines.append(f"{step['position']}. [{step['label'] or '—'}] {step['text']}{why}")
    return lines


def compare_releases(old: PEBenchRelease, new: PEBenchRelease) -> dict:
    def changes(a: dict, b: dict) -> list[dict]:
        fields = []
        if step_lines(a) != step_lines(b):
            fields.append({"field": "steps", "diff": field_diff(step_lines(a), step_lines(b))})
        fields += [
            {"field": name, "diff": field_diff(a["studio"].get(name), b["studio"].get(name))}
            for name in ("question_text", "reference_answer", "response")
            if a["studio"].get(name) != b["studio"].get(name)
        ]
        return fields or [{"field": "labels", "diff": []}]  # another label than gold (an annotator's, a judge's)

    return releases.compare(old, new, key="key", changes=changes)
