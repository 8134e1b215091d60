"""The leaderboard as the reference code's ``_save_result`` tabulates it: for each entry of the
board (the pinned or newest finished scoring run of an inference run), its stored slices turned
into the reference's cells (``inference.leaderboard.reference_cells``)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from openpyxl import Workbook

from inference.leaderboard import reference_cells
from inference.models import ScoringRun
from inference.standings import choose, model_label, stored_stats
from k12vista.csvfiles import safe_cell

MODELS_SHEET = "models"
_NOT_IN_TITLE = re.compile(r"[\\/?*\[\]:']")


@dataclass(frozen=True)
class Entry:
    scoring_run: ScoringRun
    model: str
    cells: dict[str, dict[str, reference_cells.Cell]]
    outside: reference_cells.Outside

    def rows(self) -> list[tuple[str, list[reference_cells.Cell]]]:
        return [(row, list(self.cells[row].values())) for row in reference_cells.ROWS]


def reference_board(mode: str, protocol: str | None = None) -> list[Entry]:
    """One entry per model on the board of ``mode`` (scored in ``protocol``, if given), from the
    slices its scoring job stored; each entry's scoring run names its protocol."""
    choices, _waiting = choose(mode, protocol)
    stats = stored_stats([choice.snapshot for choice in choices])
    entries = []
    for choice in choices:
        cells, outside = reference_cells.table(stats[choice.snapshot.pk])
        entries.append(Entry(choice.run, model_label(choice.run), cells, outside))
    return sorted(entries, key=lambda entry: entry.model)


def board_csv(entries: list[Entry]) -> str:
    return "\n".join(reference_cells.csv_text(entry.model, entry.cells) for entry in entries)


def sheet_title(model: str, taken: set[str]) -> str:
    """A sheet name Excel accepts for ``model`` (31 characters at most, none of ``\\/?*[]:'``),
    not yet in ``taken``; the full name is on the models sheet."""
    base = _NOT_IN_TITLE.sub("_", model)[:27] or "model"
    title, n = base, 1
    while title.lower() in taken:
        n += 1
        title = f"{base} ({n})"
    taken.add(title.lower())
    return title


def board_xlsx(entries: list[Entry]) -> bytes:
    """The reference's xlsx, one sheet per model laid out as its ``_save_result`` writes its
    file: a header row (类型, then the columns), then one row per question type and 所有题型,
    each cell a mean (empty where no item). The reference writes one file per model; a last
    sheet names the model of each sheet, as a sheet name cannot hold every model name. Text
    cells go through ``safe_cell`` as in the studio's CSVs, so a model name is never a formula."""
    workbook = Workbook()
    workbook.remove(workbook.active)
    taken = {MODELS_SHEET}
    index = [("sheet", "model", "scoring run")]
    for entry in entries:
        sheet = workbook.create_sheet(sheet_title(entry.model, taken))
        sheet.append([reference_cells.FIRST_HEADER, *reference_cells.COLUMNS])
        for row, cells in entry.rows():
            sheet.append([row, *(cell.mean for cell in cells)])
        index.append((sheet.title, entry.model, entry.scoring_run.name))
    models = workbook.create_sheet(MODELS_SHEET)
    for line in index:
        models.append([safe_cell(value) for value in line])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()
