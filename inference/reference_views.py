"""The reference code's result table on the leaderboard, its download, and a scoring run's
results in the reference layout (docs/formats.md, "Results in the reference layout")."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from inference import board_notes
from inference.leaderboard import reference_cells
from inference.leaderboard_views import LEADERBOARD_READERS, can_manage, chosen_mode
from inference.models import InferenceRun
from inference.reference import board, results
from inference.views import get_scoring_run_for_user
from k12vista import job_text
from k12vista.jobs import start_job
from k12vista.roles import require_role, token_accepted

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@require_GET
def reference_board(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *LEADERBOARD_READERS)
    mode = chosen_mode(request)
    protocol = board_notes.chosen_protocol(request.GET.get("protocol"))
    entries = board.reference_board(mode, protocol)
    ctx = {
        "mode": mode,
        "protocol": protocol,
        "protocols": sorted({entry.scoring_run.protocol for entry in entries}),
        "modes": InferenceRun.Mode.choices,
        "entries": entries,
        "columns": reference_cells.COLUMNS,
        "can_export": can_manage(request.user),
    }
    return render(request, "inference/reference_board.html", ctx)


def entries_of(request: HttpRequest, mode: str) -> list[board.Entry]:
    return board.reference_board(mode, board_notes.chosen_protocol(request.GET.get("protocol")))


@token_accepted
@require_GET
def reference_board_csv(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *LEADERBOARD_READERS)
    mode = chosen_mode(request)
    response = HttpResponse(board.board_csv(entries_of(request, mode)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="k12vista-reference-cells-{mode}.csv"'
    return response


@token_accepted
@require_GET
def reference_board_xlsx(request: HttpRequest) -> HttpResponse:
    require_role(request.user, *LEADERBOARD_READERS)
    mode = chosen_mode(request)
    response = HttpResponse(board.board_xlsx(entries_of(request, mode)), content_type=XLSX)
    response["Content-Disposition"] = f'attachment; filename="k12vista-reference-cells-{mode}.xlsx"'
    return response


@require_POST
def export_reference_results(request: HttpRequest, pk: int) -> HttpResponse:
    scoring_run = get_scoring_run_for_user(request.user, pk)
    job = start_job(kind=results.KIND, user=request.user, params={"scoring_run_id": scoring_run.pk},
                    title=job_text.title("reference_results", name=scoring_run.name))  # fmt: skip
    return redirect("k12vista:job_detail", pk=job.pk)
