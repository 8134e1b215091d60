"""The annotator's work through the API, with token auth (issue 29): claim the next question of a queue (OCR
review or step correction, narrowed as the queue page narrows it), read it, save an edit of it against the
version read (409 with what changed when someone saved first, as the pages answer), accept it, reject it with a
reason. The same calls as the pages (annotation.views: queues.next_assignment, services.edit_question,
Question.accept_ocr, services.submit_steps, services.reject), so a script's work counts as a person's.

Saving an assignment is the question edit an annotator makes; a released question is edited on the
corrections path (annotation.correction_api), never here."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import queues, services
from annotation.correction_api import ChangeOutput, QuestionChanges
from annotation.models import Assignment, SourceDocument, StepProposal
from annotation.serializers import QuestionSerializer
from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer
from k12vista.vocabulary import QuestionType, Subject

ANNOTATORS = HasRole(Role.ANNOTATOR)


class WorkOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.ChoiceField(choices=Assignment.Task.choices)
    locked_until = serializers.DateTimeField()
    done = serializers.BooleanField(help_text="accepted or rejected: the assignment is closed")
    rework_note = serializers.CharField(help_text="why an audit sent the question back ('' if it did not)")
    outside_choices = serializers.BooleanField(
        help_text="a question held from before, outside the filters of this claim: it comes first all the same"
    )
    proposal = serializers.ListField(
        child=serializers.CharField(), allow_null=True,
        help_text="a model's proposed steps waiting for this step correction (null if none)",
    )  # fmt: skip
    active_seconds = serializers.IntegerField(
        allow_null=True, help_text="active time on it so far, as the saves sent it (null while none was sent)"
    )
    guideline_version = serializers.CharField(
        help_text="the rules it was finished under (e.g. ocr_review.v2; '' until it is done)"
    )
    question = QuestionSerializer()


class ConflictOutput(serializers.Serializer):
    detail = serializers.CharField()
    version = serializers.IntegerField(help_text="the version saved now: read it, then save again deliberately")
    changed = serializers.DictField(child=ChangeOutput(), help_text="field -> {before: what you read, after: now}")


class ClaimInput(InputSerializer):
    task = serializers.ChoiceField(choices=Assignment.Task.choices)
    subject = serializers.ChoiceField(choices=Subject.choices, required=False)
    qtype = serializers.ChoiceField(choices=QuestionType.choices, required=False)
    document = serializers.IntegerField(min_value=1, required=False, help_text="an import's id")


class SaveInput(InputSerializer):
    version = serializers.IntegerField(min_value=0, max_value=2**31 - 1, help_text="the question's version as read")
    changes = QuestionChanges(required=False, help_text="the edited fields; a step correction edits solution_steps")
    active_seconds = serializers.IntegerField(min_value=0, max_value=86400, required=False,
                                              help_text="time spent on it since the last save, as the page counts "
                                              "it")  # fmt: skip


class RejectInput(InputSerializer):
    reason = serializers.CharField(max_length=5000)
    active_seconds = serializers.IntegerField(min_value=0, max_value=86400, required=False,
                                              help_text="time spent on it since the last save, as the page counts "
                                              "it")  # fmt: skip


def _output(assignment: Assignment, *, outside_choices: bool = False) -> dict[str, Any]:
    assignment.refresh_from_db()
    proposal = _proposal(assignment)
    return WorkOutput({
        "id": assignment.pk, "task": assignment.task, "locked_until": assignment.locked_until,
        "done": assignment.done_at is not None, "rework_note": assignment.rework_note,
        "outside_choices": outside_choices, "proposal": proposal.steps if proposal else None,
        "active_seconds": assignment.active_seconds, "guideline_version": assignment.guideline_version,
        "question": assignment.question,
    }).data  # fmt: skip


def _proposal(assignment: Assignment) -> StepProposal | None:
    if assignment.task != Assignment.Task.STEP_CORRECTION:
        return None
    return assignment.question.step_proposals.filter(status=StepProposal.Status.PENDING).first()


def _conflict(exc: services.EditConflict) -> Response:
    changed = {name: {"before": before, "after": after} for name, (before, after) in exc.changed.items()}
    body = {"detail": gettext("Someone saved this question after you read it: read it again, then save."),
            "version": exc.question.version, "changed": changed}  # fmt: skip
    return Response(body, status=status.HTTP_409_CONFLICT)


def _refused(field: str, message: str) -> Response:
    return Response({field: [message]}, status=status.HTTP_400_BAD_REQUEST)


def _changes(assignment: Assignment, given: dict) -> dict[str, Any] | Response:
    """The fields to save: any editable one in an OCR review; only the steps in a step correction (as the steps
    page edits), blank steps dropped as the page drops them."""
    changes = dict(given.get("changes") or {})
    if assignment.task != Assignment.Task.STEP_CORRECTION:
        return changes
    others = sorted(set(changes) - {"solution_steps"})
    if others:
        return _refused("changes", gettext("A step correction edits solution_steps only, not: %(fields)s")
                        % {"fields": ", ".join(others)})  # fmt: skip
    if "solution_steps" in changes:
        changes["solution_steps"] = [s.strip() for s in changes["solution_steps"] if s.strip()]
        if not changes["solution_steps"]:
            return _refused("changes", gettext("A solution needs at least one step."))
    return changes


def _held(request: Request, pk: int) -> Assignment:
    """The caller's own open assignment; 404 for anyone else's and for a closed one (the queue is private)."""
    return queues.get_assignment_for_user(request.user, pk)


class WorkList(APIView):
    """GET: the questions the caller holds (open assignments), oldest first."""

    permission_classes = [ANNOTATORS]

    @extend_schema(responses={200: WorkOutput(many=True)})
    def get(self, request: Request) -> Response:
        held = Assignment.objects.for_annotator(request.user).open().order_by("created")[:200]
        return Response([_output(assignment) for assignment in held])


class WorkClaim(APIView):
    """POST: the next question of the task's queue within the filters: the one the caller holds already (the
    oldest first), else a free one, claimed. 204 when nothing is waiting."""

    permission_classes = [ANNOTATORS]

    @extend_schema(request=ClaimInput, responses={200: WorkOutput, 204: None})
    def post(self, request: Request) -> Response:
        given = ClaimInput(data=request.data)
        given.is_valid(raise_exception=True)
        choices = {key: given.validated_data[key] for key in queues.QUEUE_FILTERS if key in given.validated_data}
        if "document" in choices and not SourceDocument.objects.filter(pk=choices["document"]).exists():
            return _refused("document", gettext("No import has the id %(id)s.") % {"id": choices["document"]})
        assignment = queues.next_assignment(annotator=request.user, task=given.validated_data["task"], choices=choices)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        outside = not queues.within_choices(assignment, choices)
        return Response(_output(assignment, outside_choices=outside))


class WorkDetail(APIView):
    """GET: a question the caller holds, with the proposal its step correction starts from."""

    permission_classes = [ANNOTATORS]

    @extend_schema(responses={200: WorkOutput})
    def get(self, request: Request, pk: int) -> Response:
        return Response(_output(_held(request, pk)))


class WorkSave(APIView):
    """POST: saves the edited fields of a held question if nobody saved since ``version`` (409 otherwise, with
    what changed); the lock is renewed."""

    permission_classes = [ANNOTATORS]

    @extend_schema(request=SaveInput, responses={200: WorkOutput, 409: ConflictOutput})
    def post(self, request: Request, pk: int) -> Response:
        return _save(request, pk, accept=False)


class WorkAccept(APIView):
    """POST: saves the edited fields as /save/ does, then accepts the question: an OCR review moves it on to
    step correction, a step correction submits its steps (the proposal's, if none were saved)."""

    permission_classes = [ANNOTATORS]

    @extend_schema(request=SaveInput, responses={200: WorkOutput, 409: ConflictOutput})
    def post(self, request: Request, pk: int) -> Response:
        return _save(request, pk, accept=True)


def _save(request: Request, pk: int, *, accept: bool) -> Response:
    assignment = _held(request, pk)
    given = SaveInput(data=request.data)
    given.is_valid(raise_exception=True)
    assignment.renew()
    changes = _changes(assignment, given.validated_data)
    if isinstance(changes, Response):
        return changes
    proposal = _proposal(assignment)
    question = assignment.question
    steps_wanted = accept and assignment.task == Assignment.Task.STEP_CORRECTION and "solution_steps" not in changes
    if steps_wanted and not question.solution_steps and proposal is not None:
        changes["solution_steps"] = proposal.steps  # what the steps page offers in its boxes
    note = "ocr review" if assignment.task == Assignment.Task.OCR_REVIEW else "step correction"
    try:
        question = services.edit_question(question=question, changes=changes, user=request.user,
                                          expected_version=given.validated_data["version"], note=note)  # fmt: skip
        assignment.count_active_time(given.validated_data.get("active_seconds"))
        if accept and assignment.task == Assignment.Task.OCR_REVIEW:
            question.accept_ocr(by=request.user, expected_version=question.version)
        elif accept:
            services.submit_steps(question=question, user=request.user, proposal=proposal)
    except services.EditConflict as exc:
        return _conflict(exc)
    except services.QuestionDataError as exc:
        return _refused("changes", str(exc))
    except services.LifecycleError:
        body = {"detail": gettext("This question is %(status)s now: it cannot be accepted here.")
                % {"status": question.get_status_display()}}  # fmt: skip
        return Response(body, status=status.HTTP_409_CONFLICT)
    if accept:
        assignment.complete()
    return Response(_output(assignment))


class WorkReject(APIView):
    """POST: rejects a held question with a reason (it leaves the bank), and closes the assignment, counting the
    active time sent with it."""

    permission_classes = [ANNOTATORS]

    @extend_schema(request=RejectInput, responses={200: WorkOutput})
    def post(self, request: Request, pk: int) -> Response:
        assignment = _held(request, pk)
        given = RejectInput(data=request.data)
        given.is_valid(raise_exception=True)
        try:
            services.reject(question=assignment.question, reason=given.validated_data["reason"], user=request.user)
        except services.QuestionDataError as exc:
            return _refused("reason", str(exc))
        assignment.count_active_time(given.validated_data.get("active_seconds"))
        assignment.complete()
        return Response(_output(assignment))
