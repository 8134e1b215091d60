"""Agreement statistics of a ratings file, as JSON on standard output.

    manage.py agreement ratings.csv [--scale nominal|ordinal|interval] [--categories A,B,C]
                                    [--reference RATER] [--items known.txt]

The file is CSV (header: item, rater, label or score) or JSONL (objects with those
keys). Bad lines are listed on standard error and nothing is printed on standard
output; the exit status is then 1. The method is in docs/agreement.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from pem.ratings import SCALES, RatingsError, agreement_from_file


class Command(BaseCommand):
    help = "Prints agreement statistics (kappa, pi, alpha, AC1, per label) of a ratings file as JSON."

    def add_arguments(self, parser):
        parser.add_argument("path", help="a CSV or JSONL ratings file, or - for standard input")
        parser.add_argument(
            "--scale", choices=SCALES, default="", help="default: nominal for labels, interval for scores"
        )
        parser.add_argument(
            "--categories", default="", help="comma-separated category list (default: the nine step labels)"
        )
        parser.add_argument("--reference", default="", help="a rater to compare the others with (as gold)")
        parser.add_argument("--items", type=Path, help="a file of known item ids, one a line; others are refused")
        parser.add_argument("--indent", type=int, default=2)

    def handle(self, *args, path, scale, categories, reference, items, indent, **options):
        if path == "-":
            data, name = sys.stdin.buffer.read(), ""
        else:
            try:
                data, name = Path(path).read_bytes(), path
            except OSError as exc:
                raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
        known = None
        if items is not None:
            try:
                known = [line.strip() for line in items.read_text(encoding="utf-8").splitlines() if line.strip()]
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"cannot read the item list {items}: {exc}") from exc
        category_list = [c for c in (part.strip() for part in categories.split(",")) if c] or None
        try:
            report = agreement_from_file(
                data, filename=name, categories=category_list, scale=scale, reference=reference, known_items=known
            )
        except RatingsError as exc:
            raise CommandError(f"the ratings file has problems:\n{exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(report, ensure_ascii=False, indent=indent or None))
