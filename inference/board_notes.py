"""What the leaderboard page says beside its entries, in one place: every scoring run not on the
board and why (waiting for its job, failed, finished without stored slices, rescoring), and every
entry whose newest finished scoring run took it from an earlier one (with what differs, and the
pin that keeps the earlier one). Worded at display time in the reader's language."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from inference.models import Protocol
from inference.standings import NO_SNAPSHOT, BoardState
from k12vista.models import Job

DIFFERENCES = {
    "judge": gettext_noop("the judge"), "prompts": gettext_noop("the judge prompts"),
    "protocol": gettext_noop("the protocol"),
}  # fmt: skip


def reason(status: str) -> str:
    """A NotCounted status (standings.status_of) as the reader reads it."""
    if status == NO_SNAPSHOT:
        return _(
            "finished, but no slices are stored for the board yet (it was scored inside another job, such as a "
            "judge panel, which stores them when it ends; manage.py leaderboard_snapshots stores them now)"
        )
    if status.startswith("rescore "):
        return _("rescoring: %(status)s") % {"status": reason(status.removeprefix("rescore "))}
    if status in Job.Status.values:
        return str(Job.Status(status).label).lower()
    return status


@dataclass(frozen=True)
class NotOnBoard:
    model: str
    inference_run: int
    scoring_run: int
    name: str
    reason: str
    entry_shown: bool  # the model has an entry (from another scoring run) while this one is not counted


def not_on_board(state: BoardState, mode: str) -> list[NotOnBoard]:
    rows = []
    for entry in state.board.for_mode(mode):
        if entry.run is not None:
            rows += [NotOnBoard(entry.model, entry.run.inference_run, n.scoring_run, n.name, reason(n.status), True)
                     for n in entry.run.not_counted]  # fmt: skip
    for waiting in state.waiting:
        rows += [NotOnBoard(waiting.model, waiting.inference_run, n.scoring_run, n.name, reason(n.status), False)
                 for n in waiting.not_counted]  # fmt: skip
    return rows


def replaced_text(differs: tuple[str, ...]) -> str:
    if not differs:
        return _("same judge, judge prompts and protocol")
    return _("differs in %(what)s") % {"what": ", ".join(_(DIFFERENCES[d]) for d in differs)}


def protocol_label(value: str) -> str:
    return str(Protocol(value).label) if value in Protocol.values else value


def chosen_protocol(value: str | None) -> str | None:
    return value if value in Protocol.values else None
