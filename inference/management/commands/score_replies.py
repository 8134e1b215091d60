import json
import sys

from django.core.management.base import BaseCommand, CommandError

from inference import scoring
from inference.models import Protocol, ScoringRun
from k12vista.vocabulary import LABELS_BY_CODE

MODES = {"direct": ScoringRun.Method.JUDGE_DIRECT, "step_by_step": ScoringRun.Method.JUDGE_STEPS}


class Command(BaseCommand):
    help = (
        'Reads judge replies, one JSON line each: {"reply": "<judge reply>", "record": {<the question in the '
        'reference record format>}}, and prints for each line, in order, {"score": <number or null>, "error": '
        '<null or why>} (step by step also "labels", one per step: the Chinese names in the reference protocol, '
        "the codes in the studio's). It reads and scores as a scoring job does, and writes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--protocol", choices=Protocol.values, default=Protocol.STUDIO)
        parser.add_argument("--mode", choices=sorted(MODES), required=True)
        parser.add_argument("file", help="A JSONL file, or - for standard input.")

    def handle(self, *args, protocol, mode, file, **options):
        try:
            stream = sys.stdin.buffer if file == "-" else open(file, "rb")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        try:
            for number, raw in enumerate(stream, 1):
                self.stdout.write(json.dumps(score_line(raw, number, protocol, MODES[mode]), ensure_ascii=False))
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()


def score_line(raw: bytes, number: int, protocol: str, method: str) -> dict:
    """One output line; a bad input line gives an error line, and the next one is read."""
    out: dict = {"score": None, "error": None}
    if method == ScoringRun.Method.JUDGE_STEPS:
        out["labels"] = []
    try:
        line = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return out | {"error": f"line {number}: not a JSON line: {exc}"}
    if not isinstance(line, dict) or "reply" not in line:
        return out | {"error": f'line {number}: expected an object with "reply" (and "record")'}
    record = line.get("record")
    fields, steps = scoring.score_reply(protocol, method, line["reply"], record if isinstance(record, dict) else {})
    if fields["status"] != "ok":
        return out | {"error": fields["error"] or "not understood"}
    out["score"] = fields["score"]
    if method == ScoringRun.Method.JUDGE_STEPS:
        reference = protocol == Protocol.REFERENCE
        out["labels"] = [LABELS_BY_CODE[s["label"]].chinese if reference else s["label"] for s in steps]
    return out
