"""The question bank: questions with their figures, steps, provenance, flags,
proposals, edit history and the annotators' assignments."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone, translation
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from k12vista import guidelines
from k12vista.files import extension_of, stored_name
from k12vista.line_reasons import reason_text
from k12vista.models import JobAndCreator, TimedWork
from k12vista.releases import ReleaseBase
from k12vista.vocabulary import QuestionType, Stage, Subject


# Stored names are ours: ids and an extension from the allowlist (k12vista.files), never the uploader's name.
def source_file_name(instance: SourceDocument, filename: str) -> str:
    return stored_name("sources", instance.kind, instance.kind)


def page_image_name(instance: Page, filename: str) -> str:
    return stored_name("pages", f"doc{instance.document_id}-p{instance.number}", "png")


def figure_image_name(instance: Figure, filename: str) -> str:
    return stored_name("figures", f"{instance.question.hash_id}-{instance.position}", extension_of(filename))


class CoreUnit(models.Model):
    """A core knowledge unit: near-duplicate knowledge points of one subject
    grouped by clustering, then reviewed by people (``confirmed`` once a person
    merged, split, renamed or moved into it; a re-clustering keeps it)."""

    subject = models.CharField(max_length=20, choices=Subject.choices)
    name = models.CharField(max_length=200)
    confirmed = models.BooleanField(default=False)
    job = models.ForeignKey("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["subject", "name", "id"]

    def __str__(self) -> str:
        return self.name


class KnowledgePoint(models.Model):
    subject = models.CharField(max_length=20, choices=Subject.choices)
    name = models.CharField(max_length=200)
    # "拓展思维->数字谜->日期中的周期": the point whose name is the path up to the last "->".
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    core_unit = models.ForeignKey(CoreUnit, null=True, blank=True, on_delete=models.SET_NULL, related_name="points")
    # A person put the point in its unit: re-clustering leaves it there.
    unit_pinned = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["subject", "name"], name="knowledge_point_unique")]
        ordering = ["subject", "name"]

    def __str__(self) -> str:
        return self.name


class SourceDocument(models.Model):
    """An uploaded file questions came from: an exam PDF or a JSONL/zip import."""

    class Kind(models.TextChoices):
        PDF = "pdf", "PDF"
        JSONL = "jsonl", "JSONL"
        ZIP = "zip", "ZIP"

    kind = models.CharField(max_length=10, choices=Kind.choices)
    file = models.FileField(upload_to=source_file_name, max_length=300, db_index=True)
    original_name = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.PositiveBigIntegerField()
    page_count = models.PositiveIntegerField(null=True, blank=True)
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    job = models.ForeignKey("k12vista.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.TextField(blank=True)
    # What the last PDF import read (annotation.pdf.importer): the consistency report (numbers found,
    # gaps, duplicates, sections against their stated counts, text read into no question), its
    # warnings and the questions that could not be saved. Kept here, not only in the job's result,
    # so the import screen shows it whatever became of the job.
    import_report = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.original_name

    def record_error(self, said: dict[str, Any]) -> None:
        """Keeps why the import stopped or was refused: as a code on the import report (a note of the PDF
        import's, k12vista.line_reasons' reason otherwise), worded in each reader's language when shown, and
        in English in ``error`` for logs, the admin and the rows stored before the codes."""
        with translation.override("en"):
            english = reason_text(said)
        report = {**(self.import_report if isinstance(self.import_report, dict) else {}), "error": said}
        self.error, self.import_report = english[:2000] or str(said.get("code", "")), report
        SourceDocument.objects.filter(pk=self.pk).update(error=self.error, import_report=report)

    @property
    def error_message(self) -> str:
        """Why the import stopped, in the reader's language where it was kept as a code, else as written."""
        report = self.import_report if isinstance(self.import_report, dict) else {}
        said = report.get("error")
        return (reason_text(said) if isinstance(said, dict) and self.error else "") or self.error


class Page(models.Model):
    """One rendered page of a PDF, with the text the importer read from it."""

    document = models.ForeignKey(SourceDocument, on_delete=models.CASCADE, related_name="pages")
    number = models.PositiveIntegerField()  # 1-based, as printed
    # Sizes are set by the code that stores the image (it knows them already).
    image = models.ImageField(upload_to=page_image_name, max_length=300, db_index=True)
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    # Page size in PDF points; boxes on questions and figures are in these units.
    width_pt = models.FloatField(default=0)
    height_pt = models.FloatField(default=0)
    text = models.TextField(blank=True)
    text_source = models.CharField(max_length=40, blank=True)  # "text-layer" or the OCR backend's name
    # The OCR'd lines with their boxes (annotation.pdf.importer), so a retried import reuses them.
    ocr_lines = models.JSONField(default=list, blank=True)
    # Marked done on the segmentation screen (annotation.segmentation): a person checked its cuts.
    done_at = models.DateTimeField(null=True, blank=True)
    done_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")  # fmt: skip

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="page_unique")]
        ordering = ["document", "number"]

    def __str__(self) -> str:
        return f"{self.document} p.{self.number}"


class LifecycleError(Exception):
    """A question was asked to take a step of its work from where it is not."""


class EditConflict(Exception):
    """Someone saved the question after this editor loaded it.

    ``changed`` maps each field the other person changed to (value this editor
    started from, value now saved), so the screen can show what changed.
    """

    def __init__(self, question: Question, changed: dict[str, tuple[Any, Any]]) -> None:
        super().__init__(f"question {question.hash_id} was changed by someone else")
        self.question = question
        self.changed = changed


# How many questions a set-based step moves per transaction (a few statements each, however large the lot).
STEP_CHUNK = 2000


class QuestionQuerySet(models.QuerySet["Question"]):
    def in_status(self, *statuses: str) -> QuestionQuerySet:
        return self.filter(status__in=statuses)

    def flagged(self) -> QuestionQuerySet:
        return self.filter(flags__resolved_at__isnull=True).distinct()

    def matching(self, filters: dict) -> QuestionQuerySet:
        """Applies the browse filters (empty values ignored); the same dict the
        list screen, the API and exports use."""
        qs = self
        for name in ("subject", "grade", "stage", "qtype", "status"):
            if filters.get(name) not in (None, ""):
                qs = qs.filter(**{name: filters[name]})
        if filters.get("flag"):
            qs = qs.filter(flags__code=filters["flag"], flags__resolved_at__isnull=True)
        if filters.get("knowledge_point"):
            qs = qs.filter(knowledge_points__name=filters["knowledge_point"])
        if filters.get("source_document"):
            qs = qs.filter(source_document_id=filters["source_document"])
        if filters.get("release"):  # a published release's version: the questions it holds
            version = str(filters["release"])
            qs = qs.filter(release_items__release__version=int(version)) if version.isdecimal() else qs.none()
        if filters.get("q"):
            term = filters["q"].strip()
            qs = qs.filter(Q(hash_id=term) | Q(text__contains=term))
        if filters.get("flag") or filters.get("knowledge_point"):
            qs = qs.distinct()
        return qs

    def in_release(self, release: Any) -> QuestionQuerySet:
        """The questions a release holds (as they are now; the release keeps their content then)."""
        return self.filter(release_items__release=release)

    # --- the work's steps for a whole lot (Question.TRANSITIONS) ---

    def audit(self, *, by: Any, note: str) -> int:
        """An accepted audit lot: its solution-corrected questions move to audited."""
        return self._take_step("audit", by=by, note=note)

    def release(self, *, by: Any, note: str) -> int:
        """A published release: its audited questions move to released."""
        return self._take_step("release", by=by, note=note)

    def _take_step(self, step: str, *, by: Any, note: str) -> int:
        """Moves every question of the set that is where ``step`` starts one step on,
        set-based (a few statements per chunk however large the lot), with one history
        row each whose note says what moved it (an audit, a release).

        Questions elsewhere in the lifecycle are left alone, so taking the step twice
        moves nothing the second time. Returns how many moved."""
        source, target = Question.TRANSITIONS[step]
        note = f"{step}: {note}"[:300]
        ids = list(self.filter(status=source).order_by("id").values_list("id", flat=True))
        moved = 0
        for start in range(0, len(ids), STEP_CHUNK):
            chunk = ids[start : start + STEP_CHUNK]
            with transaction.atomic():
                held = Question.objects.select_for_update().filter(pk__in=chunk, status=source)
                locked = list(held.values_list("id", "version"))
                Question.objects.filter(pk__in=[pk for pk, _v in locked]).update(
                    status=target, version=F("version") + 1, updated=timezone.now()
                )
                QuestionEdit.objects.bulk_create(
                    QuestionEdit(question_id=pk, user=by, field="status", version=version + 1, old=source, new=target,
                                 note=note)
                    for pk, version in locked
                )  # fmt: skip
            moved += len(locked)
        return moved


class Question(models.Model):
    class Status(models.TextChoices):
        IMPORTED = "imported", _("Imported")
        OCR_REVIEWED = "ocr_reviewed", _("OCR reviewed")
        SOLUTION_CORRECTED = "solution_corrected", _("Solution corrected")
        AUDITED = "audited", _("Audited")
        RELEASED = "released", _("Released")
        REJECTED = "rejected", _("Rejected")

    # The steps of the work: which status each moves a question from and to; a step
    # from anywhere else is refused (LifecycleError). The step's name is the note of its
    # history row, which review reads to tell who did a stage.
    TRANSITIONS = {
        "accept_ocr": (Status.IMPORTED, Status.OCR_REVIEWED),
        "submit_steps": (Status.OCR_REVIEWED, Status.SOLUTION_CORRECTED),
        "audit": (Status.SOLUTION_CORRECTED, Status.AUDITED),
        "release": (Status.AUDITED, Status.RELEASED),
    }
    # The statuses of the work in order, to tell which stages a question has been through.
    STATUS_ORDER = (Status.IMPORTED, Status.OCR_REVIEWED, Status.SOLUTION_CORRECTED, Status.AUDITED, Status.RELEASED)

    # The fields whose changes go into the edit history and the content hash.
    CONTENT_FIELDS = (
        "subject",
        "grade",
        "qtype",
        "text",
        "options",
        "answers",
        "raw_solution",
        "solution_steps",
        "difficulty",
        "source",
    )

    hash_id = models.CharField(max_length=64, unique=True)
    subject = models.CharField(_("subject"), max_length=20, choices=Subject.choices)
    grade = models.PositiveSmallIntegerField(_("grade"))
    # False when the source gave only the stage (a reference tag like math-g9): ``grade`` is then the
    # stage's last grade, kept for the stage and the cells, and never shown or exported as a grade.
    grade_known = models.BooleanField(_("grade known"), default=True)
    stage = models.CharField(_("stage"), max_length=10, choices=Stage.choices, editable=False)
    qtype = models.CharField(_("question type"), max_length=20, choices=QuestionType.choices)
    text = models.TextField(_("question text"), blank=True)
    # [{"label": "A", "text": "..."}, ...]; four for multiple choice.
    options = models.JSONField(_("options"), default=list, blank=True)
    # Sub-answers, in order: one per blank or sub-question; one letter for multiple choice.
    answers = models.JSONField(_("answers"), default=list, blank=True)
    raw_solution = models.TextField(_("raw solution"), blank=True)
    # The corrected reference solution, one string per step, in order.
    solution_steps = models.JSONField(_("solution steps"), default=list, blank=True)
    # Where the reference release's "<image>" placeholder stood in ``text`` (character offsets into the
    # stored text, which never holds it), so a reference export puts it back; empty when not known.
    figure_positions = models.JSONField(_("figure positions in the text"), default=list, blank=True)
    knowledge_points = models.ManyToManyField(KnowledgePoint, blank=True, related_name="questions")
    difficulty = models.FloatField(_("difficulty"), null=True, blank=True)
    source = models.CharField(_("source"), max_length=300, blank=True)  # exam name or release the question came from
    source_document = models.ForeignKey(
        SourceDocument, null=True, blank=True, on_delete=models.SET_NULL, related_name="questions"
    )
    source_page = models.ForeignKey(Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="questions")
    bbox = models.JSONField(null=True, blank=True)  # [x0, y0, x1, y1] in PDF points on source_page
    # Every region the question was read from, [page number, x0, y0, x1, y1] in PDF points: one per column
    # run of its lines and one per figure, so a question cut wrongly shows it on its pages.
    boxes = models.JSONField(_("regions on the page"), default=list, blank=True)
    status = models.CharField(_("status"), max_length=20, choices=Status.choices, default=Status.IMPORTED)
    reject_reason = models.TextField(_("reason for rejection"), blank=True)
    # Optimistic concurrency: a save must name the version it started from.
    version = models.PositiveIntegerField(default=1)
    content_hash = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)

    objects = QuestionQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["status", "id"], name="question_status_id"),
            models.Index(fields=["subject", "grade", "qtype", "id"], name="question_cell_id"),
            models.Index(fields=["stage", "id"], name="question_stage_id"),
        ]

    def __str__(self) -> str:
        return self.hash_id

    # --- the work's steps for one question (a lot's audit and release: QuestionQuerySet) ---

    def accept_ocr(self, *, by: Any, expected_version: int | None = None) -> None:
        """The OCR review is done: the question waits for its steps to be corrected."""
        self._take_step("accept_ocr", by=by, expected_version=expected_version)

    def submit_steps(self, *, by: Any, expected_version: int | None = None) -> None:
        """The solution steps are corrected: the question waits for an audit.
        (``services.submit_steps`` checks the steps and closes the proposal first.)"""
        self._take_step("submit_steps", by=by, expected_version=expected_version)

    def _take_step(self, step: str, *, by: Any, expected_version: int | None) -> None:
        """Moves the question one step along, refusing if it is not where the step starts
        (or, given ``expected_version``, if someone saved it since: EditConflict)."""
        source, target = self.TRANSITIONS[step]
        filters: dict[str, Any] = {"pk": self.pk, "status": source}
        if expected_version is not None:
            filters["version"] = expected_version
        with transaction.atomic():
            moved = Question.objects.filter(**filters).update(
                status=target, version=F("version") + 1, updated=timezone.now()
            )
            self.refresh_from_db()
            if not moved:
                if expected_version is not None and self.version != expected_version:
                    raise EditConflict(self, self.changes_since(expected_version))
                raise LifecycleError(f"question {self.hash_id} is {self.status}, not {source}")
            QuestionEdit.objects.create(
                question=self, user=by, field="status", version=self.version, old=source, new=target, note=step
            )

    def changes_since(self, version: int) -> dict[str, tuple[Any, Any]]:
        """Field -> (value at ``version``, value now), from the edit history."""
        changed: dict[str, tuple[Any, Any]] = {}
        for edit in self.edits.filter(version__gt=version).exclude(field="*").order_by("version", "id"):
            first = changed.get(edit.field, (edit.old, None))[0]
            changed[edit.field] = (first, edit.new)
        return changed


class Figure(models.Model):
    class Origin(models.TextChoices):
        EMBEDDED = "embedded", _("Embedded image")
        DRAWING = "drawing", _("Vector drawing")
        IMPORTED = "imported", _("Imported file")

    class Kind(models.TextChoices):
        FIGURE = "figure", _("Figure")
        # A formula the paper set as a small image (Word/MathType): shown inline in the text at its
        # placeholder until someone types it as LaTeX; never counted as the question's figure.
        FORMULA = "formula", _("Formula image")

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="figures")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.FIGURE)
    position = models.PositiveSmallIntegerField(default=0)
    image = models.ImageField(upload_to=figure_image_name, max_length=300, db_index=True)
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.IMPORTED)
    page = models.ForeignKey(Page, null=True, blank=True, on_delete=models.SET_NULL, related_name="figures")
    bbox = models.JSONField(null=True, blank=True)  # crop box in PDF points on page
    sharpness = models.FloatField(null=True, blank=True)  # variance of the Laplacian over ink pixels
    # Pixels the source held (an embedded image's own size, a scan's pixels under the box), before the
    # figure was enlarged to the standard size; None for vector drawings, which have no pixel limit.
    source_width = models.PositiveIntegerField(null=True, blank=True)
    source_height = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["question", "position", "id"]

    def __str__(self) -> str:
        return f"figure {self.position} of {self.question}"


class QuestionEdit(models.Model):
    """One changed field: who, when, from what, to what. Never edited or deleted."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="edits")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    field = models.CharField(max_length=40)
    version = models.PositiveIntegerField()  # the question's version this save produced
    old = models.JSONField(null=True)
    new = models.JSONField(null=True)
    note = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["question", "created", "id"]

    def __str__(self) -> str:
        return f"{self.question}.{self.field} by {self.user}"


class Flag(models.Model):
    """A problem found on a question, by a rule here or by a model check run."""

    class Code(models.TextChoices):
        MISSING_ANSWER = "missing_answer", _("Missing answer")
        OPTION_COUNT = "option_count", _("Multiple choice without four options")
        BLANK_MISMATCH = "blank_mismatch", _("Blanks and answers differ in number")
        EMPTY_TEXT = "empty_text", _("Empty question text")
        LATEX_ERROR = "latex_error", _("LaTeX that does not parse")
        FIGURE_MISSING = "figure_missing", _("No figure")
        BLURRED_FIGURE = "blurred_figure", _("Blurred figure")
        LOW_RESOLUTION = "low_resolution", _("Figure below the resolution threshold")
        MODEL_CHECK = "model_check", _("Found by a model check")
        IMPORT_GAP = "import_gap", _("Next to a gap in the imported paper")
        IMPORT_ERROR = "import_error", _("Part of the question could not be imported")
        GARBLED_TEXT = "garbled_text", _("Garbled text")
        FORMULA_IMAGE = "formula_image", _("Formula kept as an image")

    class Origin(models.TextChoices):
        RULE = "rule", _("Rule")
        MODEL = "model", _("Model check")

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="flags")
    code = models.CharField(max_length=30, choices=Code.choices)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.RULE)
    message = models.TextField()
    detail = models.JSONField(default=dict, blank=True)
    # For model flags: which run wrote it (an id in the inference app, kept as text
    # so that this app does not depend on it).
    run_ref = models.CharField(max_length=100, blank=True)
    created = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["question", "code"]
        indexes = [models.Index(fields=["code", "resolved_at"], name="flag_code_open")]

    def __str__(self) -> str:
        return f"{self.code} on {self.question}"


class Segment(models.Model):
    """How a PDF question is cut from its paper, as the segmentation screen shows it: the number printed
    on the paper and what the region is. The importer writes it; ``human`` once a person repaired the
    question there (annotation.segmentation), and from then on a re-import leaves the question alone."""

    class Kind(models.TextChoices):
        QUESTION = "question", _("Question")
        STEM = "stem", _("Shared stem")
        NOT_QUESTION = "not_question", _("Not a question")

    question = models.OneToOneField(Question, on_delete=models.CASCADE, related_name="segment")
    document = models.ForeignKey(SourceDocument, on_delete=models.CASCADE, related_name="segments")
    label = models.CharField(_("number"), max_length=40, blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.QUESTION)
    # Where its options, answer and solution were read, where they stand in its lines (not an answer key at
    # the end of the paper): [kind, page, x0, y0, x1, y1] in PDF points, kind "options", "answer" or "solution".
    regions = models.JSONField(default=list, blank=True)
    human = models.BooleanField(default=False)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["document", "question"]

    def __str__(self) -> str:
        return f"{self.label or '?'} of {self.document}"


class Repair(models.Model):
    """One change made on the segmentation screen, with the state it replaced, so that it can be undone.
    ``before`` holds the questions, figures and pages it touched as they were; ``after`` the versions the
    questions had once it was made (an undo is refused when someone changed them since) and the
    questions it created."""

    class Action(models.TextChoices):
        ADD = "add", _("New box")
        MOVE = "move", _("Box moved")
        SPLIT = "split", _("Split")
        MERGE = "merge", _("Merge")
        RENUMBER = "renumber", _("Renumber")
        FIGURE = "figure", _("Move figure")
        ANSWER = "answer", _("Move answer")
        STEM = "stem", _("Shared stem")
        NOT_QUESTION = "not_question", _("Not a question")
        PAGE = "page", _("Page done")

    document = models.ForeignKey(SourceDocument, on_delete=models.CASCADE, related_name="repairs")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=30, choices=Action.choices)
    note = models.CharField(max_length=300, blank=True)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    created = models.DateTimeField(default=timezone.now)
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["document", "-created", "-id"]

    def __str__(self) -> str:
        return f"{self.action} on {self.document}"


class StepProposal(models.Model):
    """A model's rewrite of the raw solution into steps, waiting for people."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        USED = "used", _("Used")
        DISCARDED = "discarded", _("Discarded")

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="step_proposals")
    steps = models.JSONField(default=list)
    run_ref = models.CharField(max_length=100, blank=True)
    model_name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["question", "-created", "-id"]

    def __str__(self) -> str:
        return f"proposal for {self.question}"


class AssignmentQuerySet(models.QuerySet["Assignment"]):
    def for_annotator(self, user: Any) -> AssignmentQuerySet:
        return self.filter(annotator=user)

    def open(self) -> AssignmentQuerySet:
        return self.filter(done_at__isnull=True)


class Assignment(TimedWork):
    """A question held by one annotator for one stage of work, under a lock that expires."""

    class Task(models.TextChoices):
        OCR_REVIEW = "ocr_review", _("OCR review")
        STEP_CORRECTION = "step_correction", _("Solution step correction")

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    task = models.CharField(max_length=20, choices=Task.choices)
    created = models.DateTimeField(default=timezone.now)
    locked_until = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)
    # Set when an audit sends the question back: what the inspector found.
    rework_note = models.TextField(blank=True)

    objects = AssignmentQuerySet.as_manager()

    class Meta:
        ordering = ["created", "id"]
        constraints = [
            # One open assignment per question and task: the lock.
            models.UniqueConstraint(
                fields=["question", "task"], condition=Q(done_at__isnull=True), name="assignment_one_open"
            )
        ]

    def __str__(self) -> str:
        return f"{self.task} of {self.question} by {self.annotator}"

    @staticmethod
    def lock_expiry():
        return timezone.now() + timedelta(minutes=settings.ASSIGNMENT_LOCK_MINUTES)

    def renew(self) -> None:
        """Extends the holder's lock while they keep working (autosave, reload)."""
        self.locked_until = self.lock_expiry()
        Assignment.objects.filter(pk=self.pk, done_at__isnull=True).update(locked_until=self.locked_until)

    def count_active_time(self, active_seconds: Any) -> None:
        """Counts the active time a page sent with a save (a number from the page, clamped). Called only
        once the save has won: a refused save's page gives its seconds back and sends them again."""
        if self.done_at is None:
            self.add_active_seconds(guidelines.active_seconds(active_seconds))

    def complete(self) -> None:
        """Done, under the guideline of its task as it reads now (the task names are the guideline kinds)."""
        self.done_at = timezone.now()
        self.guideline_version = guidelines.current_version_name(self.task)
        Assignment.objects.filter(pk=self.pk, done_at__isnull=True).update(
            done_at=self.done_at, guideline_version=self.guideline_version
        )


# --- the benchmark: candidate sets and releases ---------------------------------------


class CandidateSet(JobAndCreator):
    """A stratified draw from the bank: the targets, the seed and the bank's
    fingerprint it was drawn with (same seed and bank: same set), and the per-cell report."""

    name = models.CharField(max_length=200)
    targets = models.JSONField(default=dict)
    seed = models.BigIntegerField()
    bank_fingerprint = models.CharField(max_length=64)
    report = models.JSONField(default=dict)  # {"cells": [...], "coverage": {...}, "total": n}
    questions = models.ManyToManyField(Question, related_name="candidate_sets", blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.name


class Release(ReleaseBase):
    """A versioned snapshot of a candidate set. Built as a draft (items and files
    written by a job), then published; a published release never changes (the life
    cycle is ``k12vista.releases``; this adds what a benchmark release holds)."""

    candidate_set = models.ForeignKey(CandidateSet, null=True, on_delete=models.SET_NULL, related_name="releases")
    licence = models.CharField(max_length=100)
    # summary: counts per cell, knowledge-point coverage, models and prompts, audits with their rates.

    class Meta(ReleaseBase.Meta):
        pass

    def __str__(self) -> str:
        return f"v{self.version} {self.name}"

    def label(self) -> str:
        return gettext("release v%(version)s") % {"version": self.version}

    def files_written(self) -> bool:
        return self.files.count() == len(ReleaseFile.Form.values)


class ReleaseItem(models.Model):
    """One question as the release holds it: its content then, not now."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="items")
    question = models.ForeignKey(Question, null=True, on_delete=models.SET_NULL, related_name="release_items")
    hash_id = models.CharField(max_length=64)
    version = models.PositiveIntegerField()  # the question's version snapshotted
    content_hash = models.CharField(max_length=64)
    content = models.JSONField()  # the content fields, knowledge points and figure names
    provenance = models.JSONField(default=dict)

    class Meta:
        ordering = ["release", "hash_id"]
        constraints = [models.UniqueConstraint(fields=["release", "hash_id"], name="release_item_unique")]

    def __str__(self) -> str:
        return f"{self.hash_id} in {self.release}"


class ReleaseFile(models.Model):
    class Form(models.TextChoices):
        REFERENCE = "reference", _("Reference JSONL")
        STUDIO = "studio", _("Studio zip with figures")
        HUGGINGFACE = "huggingface", _("Hugging Face datasets (Parquet)")

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="files")
    form = models.CharField(max_length=20, choices=Form.choices)
    path = models.CharField(max_length=300)  # under MEDIA_ROOT, a name we chose
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    count = models.PositiveIntegerField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["release", "form"]
        constraints = [models.UniqueConstraint(fields=["release", "form"], name="release_file_unique")]

    def __str__(self) -> str:
        return f"{self.form} of {self.release}"


class Correction(models.Model):
    """A fix to one released question, on a path of its own beside the audits (which sample whole lots):
    a researcher or inspector opens it (what is wrong, the fix proposed), an annotator makes the fix, one
    inspector checks it. An accepted fix is written to the bank and goes into the next release with its
    diff; the published release never changes (annotation.corrections)."""

    class State(models.TextChoices):
        OPEN = "open", pgettext_lazy("correction", "Open")
        FIXED = "fixed", _("Fixed, waiting for a check")
        ACCEPTED = "accepted", _("Accepted")
        RETURNED = "returned", _("Sent back to the annotator")

    UNFINISHED = (State.OPEN, State.FIXED, State.RETURNED)

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="corrections")
    # The published release the problem was found in (the newest holding the question when it was opened).
    found_in = models.ForeignKey(Release, null=True, on_delete=models.SET_NULL, related_name="+")
    state = models.CharField(_("state"), max_length=10, choices=State.choices, default=State.OPEN)
    problem = models.TextField(_("what is wrong"))
    proposal = models.TextField(_("proposed fix"), blank=True)
    opened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    opened = models.DateTimeField(default=timezone.now)
    # The annotator's fix: {field: {"before": …, "after": …}}, made against the question's ``base_version``.
    changes = models.JSONField(default=dict, blank=True)
    base_version = models.PositiveIntegerField(null=True, blank=True)
    fixed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    fixed = models.DateTimeField(null=True, blank=True)
    checked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    checked = models.DateTimeField(null=True, blank=True)
    check_note = models.TextField(_("inspector's note"), blank=True)
    # The release that carries the accepted fix (a draft until it is published).
    released_in = models.ForeignKey(
        Release, null=True, blank=True, on_delete=models.SET_NULL, related_name="corrections"
    )

    class Meta:
        ordering = ["-opened", "-id"]
        constraints = [
            # One correction at a time per question: a second would fix against a stale version.
            models.UniqueConstraint(
                fields=["question"], condition=Q(state__in=["open", "fixed", "returned"]), name="correction_one_open"
            )
        ]
        indexes = [models.Index(fields=["state", "id"], name="correction_state_id")]

    def __str__(self) -> str:
        return f"correction #{self.pk} of {self.question}"
