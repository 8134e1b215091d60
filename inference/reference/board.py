"""The leaderboard as the reference code's ``_save_result`` tabulates it: for each entry of the
board (the pinned or newest finished scoring run of an inference run), its stored slices turned
into the reference's cells (``inference.leaderboard.reference_cells``)."""

from __future__ import annotations

from dataclasses import dataclass

from inference.leaderboard import reference_cells
from inference.models import ScoringRun
from inference.standings import choose, model_label, stored_stats


@dataclass(frozen=True)
class Entry:
    scoring_run: ScoringRun
    model: str
    cells: dict[str, dict[str, reference_cells.Cell]]
    outside: reference_cells.Outside

    def rows(self) -> list[tuple[str, list[reference_cells.Cell]]]:
        return [(row, list(self.cells[row].values())) for row in reference_cells.ROWS]


def reference_board(mode: str) -> list[Entry]:
    """One entry per model on the board of ``mode``, from the slices its scoring job stored."""
    choices, _waiting = choose(mode)
    stats = stored_stats([choice.snapshot for choice in choices])
    entries = []
    for choice in choices:
        cells, outside = reference_cells.table(stats[choice.snapshot.pk])
        entries.append(Entry(choice.run, model_label(choice.run), cells, outside))
    return sorted(entries, key=lambda entry: entry.model)


def board_csv(entries: list[Entry]) -> str:
    return "\n".join(reference_cells.csv_text(entry.model, entry.cells) for entry in entries)
