"""PEM-800K at scale on PostgreSQL: import, filters + funnel, training export, each beside its baseline.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/k12_bench DATA_DIR=$(mktemp -d) \\
        nice -n 10 .venv/bin/python -m bench.pem800k --records 50000 [--seed 0] [--file PATH]

``--records 840175`` is the paper's size. It EMPTIES the chain-of-thought tables of the database it
is given (and migrates it): use a throwaway database. Each phase runs in its own child process,
so the peak RSS printed is that phase's own:

0. ``setup``: a bare ``django.setup()``, the floor of every phase's peak RSS;
1. ``copy``: the baseline (run again after the import: the ratio is against the mean), a raw
   streaming COPY of the same rows (chains, steps, labels: parsed from the same file, no checks)
   into plain tables without indexes or constraints;
2. ``import``: ``pem.training.pem800k_import.import_pem800k`` (checks every line, keys, links to the
   bank, COPY into the real tables with their indexes and constraints); its reader process's
   CPU and peak RSS are printed beside the importer's own;
3. ``reimport``: the same file again (every record unchanged);
4. ``filters``: the four filters and the funnel (coverage 3 models, a balance target);
5. ``copy_to``: the baseline for the export, ``COPY (SELECT ...) TO STDOUT`` of the kept rows
   (chain, question, reference answer, steps, labels) into a file;
6. ``export``: ``pem.training.exports.write_export`` of the TRL format alone, then of all four.
"""

# The SQL below holds our own table names and an integer id only.
# ruff: noqa: S608

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

PAPER_RECORDS = 840_175
BATCH = 1000


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    import django

    django.setup()


def peak_mib() -> float:
    """This process's peak RSS (VmHWM starts afresh at exec; ru_maxrss keeps the parent's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> dict:
    """CPU time so far of this process and of its PostgreSQL backend (same machine): on a shared
    machine the wall-clock ratio follows the load, the CPU a phase costs does not."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    client = usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        server = float("nan")
    return {"client": client, "server": server}


def phase_copy(path: Path) -> dict:
    """Raw COPY of the file's chains, steps and labels into plain tables (the import's baseline)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_chain, bench_step, bench_label")
        cursor.execute("CREATE TABLE bench_chain (id bigint, hash_id text, question text, answer text, response text, "
                       "model text)")  # fmt: skip
        cursor.execute("CREATE TABLE bench_step (id bigint, chain_id bigint, position int, text text)")
        cursor.execute("CREATE TABLE bench_label (step_id bigint, label text, explanation text)")
    started = time.perf_counter()
    chain_id = step_id = 0
    batch: list[dict] = []

    def flush() -> None:
        nonlocal chain_id, step_id
        chains, steps, labels = [], [], []
        for record in batch:
            chain_id += 1
            chains.append((chain_id, record["hash_id"], record.get("question"), json.dumps(record.get("ground_truth")),
                           record.get("student_infer"), record.get("model")))  # fmt: skip
            for position, (text, label, explanation) in enumerate(record["step_labels"], 1):
                step_id += 1
                steps.append((step_id, chain_id, position, text))
                labels.append((step_id, label, explanation))
        with connection.cursor() as cursor:
            for table, rows in (("bench_chain", chains), ("bench_step", steps), ("bench_label", labels)):
                with cursor.copy(f"COPY {table} FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
        batch.clear()

    with open(path, "rb") as lines:
        for line in lines:
            batch.append(json.loads(line))
            if len(batch) >= BATCH:
                flush()
    flush()
    return {"seconds": time.perf_counter() - started, "records": chain_id, "steps": step_id}


def phase_import(path: Path) -> dict:
    from pem.training import reader
    from pem.training.pem800k_import import import_pem800k

    # The reader process's own peak RSS comes in its last frame (VmHWM restarts at its exec).
    read_frame, peaks = reader.read_frame, []

    def reading(stream):  # noqa: ANN001, ANN202
        frame = read_frame(stream)
        if frame and frame.get("peak_rss_kib"):
            peaks.append(frame["peak_rss_kib"] / 1024)
        return frame

    reader.read_frame = reading
    started = time.perf_counter()
    report = import_pem800k(path=path, name="pem800k")
    return {"seconds": time.perf_counter() - started, "created": report["created"], "unchanged": report["unchanged"],
            "failed": report["failed"], "reader_peak_rss_mib": round(max(peaks, default=0), 1)}  # fmt: skip


def phase_filters() -> dict:
    from pem.models import FilterRun
    from pem.training import filters

    FilterRun.objects.all().delete()
    target = {"correct": 0.4, "CE": 0.1, "KAE": 0.1, "LRE": 0.1, "ICE": 0.1, "IAE": 0.1, "QM": 0.05, "LRK": 0.05}
    run = filters.start_filter_run(source="imported", rater="pem800k", user=None,
                                   params={"balance": {"target": target, "seed": 1}})  # fmt: skip
    started = time.perf_counter()
    filters.run_filters(run)
    seconds = time.perf_counter() - started
    funnel = run.funnel
    return {"seconds": seconds, "filter_run": run.pk, "input": funnel["input"]["chains"], "kept": run.kept,
            "removed": {name: funnel[name]["chains"] for name in filters.STAGES}}  # fmt: skip


def phase_copy_to(filter_run: int, out: Path) -> dict:
    from django.db import connection

    sql = (
        "COPY (SELECT c.id, c.question_text, c.reference_answer, s.position, s.text, l.label, l.explanation "
        "FROM pem_filteredchain f JOIN pem_chainofthought c ON c.id = f.cot_id JOIN pem_step s ON s.cot_id = c.id "
        "LEFT JOIN pem_steplabel l ON l.step_id = s.id AND l.source = 'imported' AND l.rater = 'pem800k' "
        f"WHERE f.run_id = {int(filter_run)} AND f.removed_by = '' ORDER BY c.id, s.position) TO STDOUT"
    )
    started = time.perf_counter()
    size = 0
    with connection.cursor() as cursor, cursor.copy(sql) as copy, open(out, "wb") as sink:
        for chunk in copy:
            sink.write(chunk)
            size += len(chunk)
    return {"seconds": time.perf_counter() - started, "bytes": size}


def phase_export(filter_run: int, wanted: list[str]) -> dict:
    from pem.models import ChainOfThought, FilterRun
    from pem.training import exports

    # Each measured export starts from the same state; only the marked rows are reset (an UPDATE of
    # every chain would leave the table with a dead copy of each row for the export to read past).
    ChainOfThought.objects.filter(in_training_data=True).update(in_training_data=False)
    export = exports.start_export(filter_run=FilterRun.objects.get(pk=filter_run), user=None, formats_wanted=wanted)
    started = time.perf_counter()
    result = exports.write_export(export)
    seconds = time.perf_counter() - started
    size = sum(p.stat().st_size for p in exports.export_path(export).rglob("*") if p.is_file())
    return {"seconds": seconds, "records": result["records"], "bytes": size, "formats": wanted}


def run_phase(name: str, *extra: str, label: str = "") -> dict:
    command = [sys.executable, "-m", "bench.pem800k", "--phase", name, *extra]
    done = subprocess.run(command, check=False, capture_output=True, text=True)  # noqa: S603 (this script)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"phase {name} failed")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{label or name:>9}: {json.dumps(result)}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pem800k", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help=f"{PAPER_RECORDS:,} is the paper's PEM-800K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--file", type=Path, help="use this pem.jsonl instead of generating one")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--arg", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        parser.error("set DATABASE_URL to a throwaway PostgreSQL database; this empties its chain tables")
    setup()
    if args.phase:
        handlers = {
            "setup": dict,
            "copy": lambda: phase_copy(Path(args.arg[0])),
            "import": lambda: phase_import(Path(args.arg[0])),
            "filters": phase_filters,
            "copy_to": lambda: phase_copy_to(int(args.arg[0]), Path(args.arg[1])),
            "export": lambda: phase_export(int(args.arg[0]), args.arg[1].split(",")),
        }
        before = cpu_seconds()
        result = handlers[args.phase]()
        after = cpu_seconds()
        cpu = {f"cpu_{k}_s": round(after[k] - before[k], 2) for k in before}
        # The import's reader process (pem.training.reader): its CPU counts too.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu["cpu_children_s"] = round(children.ru_utime + children.ru_stime, 2)
        print(json.dumps({**result, **cpu, "peak_rss_mib": round(peak_mib(), 1)}))
        return 0
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    work = Path(os.environ.get("DATA_DIR") or "/tmp") / "bench-pem800k"  # noqa: S108
    work.mkdir(parents=True, exist_ok=True)
    path = args.file
    if path is None:
        started = time.perf_counter()
        scale = args.records / PAPER_RECORDS
        subprocess.run([sys.executable, "-m", "bench.generate", "--scale", repr(scale), "--seed", str(args.seed),
                        "--only", "pem", "--out", str(work)], check=True)  # fmt: skip
        path = work / "pem.jsonl"
        print(f"generated {path} in {time.perf_counter() - started:.1f} s (not counted)", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE pem_filteredchain, pem_filterrun, pem_trainingrun, pem_trainingexport, "
                       "pem_steplabel, pem_step, pem_chainofthought CASCADE")  # fmt: skip
    print(f"load average before: {os.getloadavg()}", flush=True)
    bare = run_phase("setup")
    copy = run_phase("copy", "--arg", str(path))
    imported = run_phase("import", "--arg", str(path))
    copy_after = run_phase("copy", "--arg", str(path), label="copy again")
    again = run_phase("import", "--arg", str(path), label="reimport")
    filtered = run_phase("filters")
    copy_to = run_phase("copy_to", "--arg", str(filtered["filter_run"]), "--arg", str(work / "copy_to.tsv"))
    export_trl = run_phase("export", "--arg", str(filtered["filter_run"]), "--arg", "trl")
    export_all = run_phase("export", "--arg", str(filtered["filter_run"]), "--arg", "llamafactory,swift,trl,qwen")
    records = copy["records"]
    print(f"\nrecords {records:,}, steps {copy['steps']:,}; load average after: {os.getloadavg()}")
    # The machine is shared: the baseline runs before and after the import, and the ratio is taken
    # against their mean (both are printed).
    base = (copy["seconds"] + copy_after["seconds"]) / 2
    ratio, above = base / imported["seconds"], imported["peak_rss_mib"] - bare["peak_rss_mib"]
    print(f"setup:    a bare django.setup() peaks at {bare['peak_rss_mib']} MiB")
    print(f"import:   {records / imported['seconds']:,.0f} records/s vs raw COPY {records / base:,.0f} records/s "
          f"(before {copy['seconds']:.1f} s, after {copy_after['seconds']:.1f} s) = {ratio:.2f}x; "
          f"peak RSS {imported['peak_rss_mib']} MiB ({above:.1f} above a bare setup)")  # fmt: skip
    both = imported["peak_rss_mib"] + imported["reader_peak_rss_mib"]
    print(f"          with the reader process's {imported['reader_peak_rss_mib']} MiB: {both:.1f} MiB at most together")
    cpu = {k: imported[f"cpu_{k}_s"] for k in ("client", "server", "children")}
    print(
        f"          CPU: importer {cpu['client']:.1f} s, its server process {cpu['server']:.1f} s, reader "
        f"{cpu['children']:.1f} s; raw COPY: client {copy['cpu_client_s']:.1f} s, "
        f"server {copy['cpu_server_s']:.1f} s"
    )
    print(f"again:    {again['unchanged']:,} unchanged in {again['seconds']:.1f} s")
    print(f"filters:  {filtered['seconds']:.1f} s for {filtered['input']:,} chains -> {filtered['kept']:,} kept")
    kept = export_trl["records"]
    ratio, rss = copy_to["seconds"] / export_trl["seconds"], export_trl["peak_rss_mib"]
    print(f"export:   TRL {kept / export_trl['seconds']:,.0f} records/s vs COPY TO {kept / copy_to['seconds']:,.0f} "
          f"records/s = {ratio:.2f}x; peak RSS {rss} MiB")  # fmt: skip
    ratio, rss = copy_to["seconds"] / export_all["seconds"], export_all["peak_rss_mib"]
    rate = kept / export_all["seconds"]
    print(f"          all four formats {rate:,.0f} records/s = {ratio:.2f}x; peak RSS {rss} MiB")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_chain, bench_step, bench_label")
    return 0


if __name__ == "__main__":
    sys.exit(main())
