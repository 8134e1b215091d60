import re
from collections.abc import Iterable
from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.models import Flag, Question, SourceDocument
from annotation.pdf import vision
from k12vista.vocabulary import GRADES, QuestionType, Stage, Subject

OPTION_LINE = re.compile(r"^\s*([A-H])\s*[.、．:：)]\s*(.*)$")


def lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


class QuestionForm(forms.Form):
    """The fields an annotator corrects in OCR review. Lists are edited one item a line."""

    version = forms.IntegerField(widget=forms.HiddenInput)
    subject = forms.ChoiceField(choices=Subject.choices, label=_("Subject"))
    grade = forms.TypedChoiceField(choices=[(g, g) for g in GRADES], coerce=int, label=_("Grade"))
    qtype = forms.ChoiceField(choices=QuestionType.choices, label=_("Type"))
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6, "data-math-source": "preview-text"}),
        required=False,
        label=_("Question text"),
    )
    options = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "data-math-source": "preview-options"}),
        required=False,
        label=_("Options (one a line: A. …)"),
    )
    answers = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "data-math-source": "preview-answers"}),
        required=False,
        label=_("Answers (one sub-answer a line)"),
    )
    raw_solution = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False, label=_("Solution"))
    knowledge_points = forms.CharField(required=False, label=_("Knowledge points (comma-separated)"))
    difficulty = forms.FloatField(required=False, min_value=0, max_value=1, label=_("Difficulty (0-1)"))

    @classmethod
    def for_question(cls, question: Question, data=None) -> "QuestionForm":
        initial = {
            "version": question.version,
            "subject": question.subject,
            "grade": question.grade,
            "qtype": question.qtype,
            "text": question.text,
            "options": "\n".join(f"{o['label']}. {o['text']}" for o in question.options),
            "answers": "\n".join(question.answers),
            "raw_solution": question.raw_solution,
            "knowledge_points": "，".join(question.knowledge_points.values_list("name", flat=True)),
            "difficulty": question.difficulty,
        }
        return cls(data, initial=initial)

    def clean_options(self):
        options = []
        for line in lines(self.cleaned_data["options"]):
            match = OPTION_LINE.match(line)
            if not match:
                raise forms.ValidationError(
                    _("Write each option as a letter, a dot and its text: %(line)s"), params={"line": line}
                )
            options.append({"label": match[1], "text": match[2]})
        return options

    def clean_answers(self):
        return lines(self.cleaned_data["answers"])

    def clean_knowledge_points(self):
        return [p.strip() for p in re.split(r"[,，、;；\n]", self.cleaned_data["knowledge_points"]) if p.strip()]

    def changes(self) -> dict:
        return {k: v for k, v in self.cleaned_data.items() if k != "version"}


class FixForm(QuestionForm):
    """The fix of a correction (annotation.corrections): the question form's content fields, read and
    refused as the editor reads and refuses them, and the solution steps, one a line."""

    FIELDS = ("text", "options", "answers", "raw_solution", "solution_steps")
    solution_steps = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in set(self.fields) - set(self.FIELDS):
            del self.fields[name]

    def clean_solution_steps(self):
        return lines(self.cleaned_data["solution_steps"])


# How each edited field reads on a conflict card (the form's labels, without their typing hints).
CHANGE_LABELS = {
    "subject": _("Subject"),
    "grade": _("Grade"),
    "qtype": _("Type"),
    "text": _("Question text"),
    "options": _("Options"),
    "answers": _("Answers"),
    "raw_solution": _("Solution"),
    "solution_steps": _("Solution steps"),
    "knowledge_points": _("Knowledge points"),
    "difficulty": _("Difficulty"),
    "source": _("Source"),
}
CHANGE_CHOICES = {"subject": Subject, "qtype": QuestionType}


def shown_value(field: str, value) -> str:
    """A stored value as the editor shows it: choices by name, lists one item a line, nothing as a dash."""
    if value is None or value == "" or value == []:
        return "—"
    if field in CHANGE_CHOICES:
        try:
            return str(CHANGE_CHOICES[field](value).label)
        except ValueError:
            return str(value)
    if field == "options":
        return "\n".join(f"{o.get('label', '')}. {o.get('text', '')}" if isinstance(o, dict) else str(o) for o in value)
    if field == "knowledge_points":
        return "，".join(str(v) for v in value)
    if isinstance(value, list | tuple):
        return "\n".join(str(v) for v in value)
    return str(value)


def described_changes(changed: dict) -> list[dict[str, str]]:
    """Someone else's changes ({field: (before, after)}) for the conflict card: a label and both values shown."""
    return [
        {"field": name, "label": str(CHANGE_LABELS.get(name, name)), "before": shown_value(name, before),
         "after": shown_value(name, after)}
        for name, (before, after) in changed.items()
    ]  # fmt: skip


class RejectForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), label=_("Reason for rejecting"))


class StepsForm(forms.Form):
    version = forms.IntegerField(widget=forms.HiddenInput)

    def __init__(self, data=None, *, steps=None, **kwargs):
        super().__init__(data, **kwargs)
        submitted = [s.strip() for s in data.getlist("step")] if data is not None else list(steps or [])
        self.submitted_steps = submitted or [""]  # always at least one box to type in

    def clean(self):
        cleaned = super().clean()
        cleaned["steps"] = [s for s in self.submitted_steps if s]
        if not cleaned["steps"]:
            raise forms.ValidationError(_("A solution needs at least one step."))
        return cleaned


class QuestionFilterForm(forms.Form):
    subject = forms.ChoiceField(choices=[("", "—"), *Subject.choices], required=False, label=_("Subject"))
    grade = forms.TypedChoiceField(
        choices=[("", "—"), *[(g, g) for g in GRADES]], coerce=int, required=False, empty_value=None, label=_("Grade")
    )
    stage = forms.ChoiceField(choices=[("", "—"), *Stage.choices], required=False, label=_("Stage"))
    qtype = forms.ChoiceField(choices=[("", "—"), *QuestionType.choices], required=False, label=_("Type"))
    status = forms.ChoiceField(choices=[("", "—"), *Question.Status.choices], required=False, label=_("Status"))
    flag = forms.ChoiceField(choices=[("", "—"), *Flag.Code.choices], required=False, label=_("Flag"))
    knowledge_point = forms.CharField(required=False, label=_("Knowledge point"))
    q = forms.CharField(required=False, label=_("Hash id or text"))
    after = forms.IntegerField(required=False, widget=forms.HiddenInput)


class QueueChoiceForm(forms.Form):
    """What an annotator narrows their queue to; every field may stay open."""

    subject = forms.ChoiceField(choices=[("", _("Any subject")), *Subject.choices], required=False, label=_("Subject"))
    qtype = forms.ChoiceField(choices=[("", _("Any type")), *QuestionType.choices], required=False, label=_("Type"))
    document = forms.ModelChoiceField(
        queryset=SourceDocument.objects.order_by("-id"), required=False, empty_label=_("Any import"), label=_("Import")
    )

    def choices(self) -> dict:
        """The valid choices as plain values (kept in the session between questions)."""
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        return {
            "subject": data["subject"],
            "qtype": data["qtype"],
            "document": data["document"] and data["document"].pk,
        }


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ".pdf,application/pdf"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        files = data if isinstance(data, list | tuple) else [data]
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


class PdfUploadForm(forms.Form):
    # A declared field, taken off the class by Django's form metaclass: it does not replace BaseForm.files.
    files = MultipleFileField(label=_("Exam PDFs"))  # type: ignore[assignment]
    subject = forms.ChoiceField(choices=Subject.choices, label=_("Subject"))
    grade = forms.TypedChoiceField(choices=[(g, g) for g in GRADES], coerce=int, initial=9, label=_("Grade"))
    # Which pages a vision model reads (annotation.pdf.vision); shown only where one is set up.
    reader = forms.ChoiceField(
        choices=[("unsure", _("Pages the rules are unsure of")), ("vision", _("Every page")), ("rules", _("No page"))],
        initial="unsure", required=False, label=_("Read by the vision model"),
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            configured = vision.get_segmentation_backend() is not None
        except vision.VisionUnavailable:
            configured = False
        if not configured:
            del self.fields["reader"]


class QuestionFileForm(forms.Form):
    file = forms.FileField(
        label=_("JSONL file, or a zip of JSONL and images"),
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.json,.zip"}),
    )


def filter_controls(form: QuestionFilterForm) -> list[dict]:
    """The filter form as plain data for the list template.

    Rendering Django's select widgets for every request cost about 9 ms of the
    list page's 20 ms budget at 300,000 questions; the template loops over
    these dicts instead.
    """
    current = form.data
    controls = []
    for name, field in form.fields.items():
        if name == "after":
            continue
        value = str(current.get(name, "") or "")
        control: dict[str, Any] = {"name": name, "label": field.label, "value": value, "choices": None}
        if isinstance(field, forms.ChoiceField):
            # Django keeps choices as (value, text) pairs once set; the stubs give the type of what may be set.
            pairs = cast(Iterable[tuple[Any, Any]], field.choices)
            control["choices"] = [(str(v), text, str(v) == value) for v, text in pairs]
        controls.append(control)
    return controls
