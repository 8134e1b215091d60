"""Forms of the researcher's PEBench data screens (pem/data_views.py)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from inference.models import InferenceRun, ScoringRun
from k12vista.vocabulary import QuestionType, Stage, Subject
from pem.build import DEFAULT_STRATA, STRATUM_FIELDS
from pem.models import ChainOfThought, PEBenchBuild

ANY = [("", "—")]


class ImportForm(forms.Form):
    file = forms.FileField(
        label=_("PEBench JSONL file (reference format or ours), or a zip holding one"),
        widget=forms.ClearableFileInput(attrs={"accept": ".jsonl,.json,.zip"}),
    )
    name = forms.CharField(
        max_length=200, required=False, label=_("Import name (recorded as the rater of its labels; default: file name)")
    )


# The fields a build may stratify on, as people read them.
STRATUM_NAMES = {
    "subject": _("Subject"), "qtype": _("Question type"), "stage": _("Stage"), "grade": _("Grade"),
    "model_name": _("Model"), "origin": _("Origin"),
}  # fmt: skip


class BuildForm(forms.Form):
    target_size = forms.IntegerField(min_value=1, max_value=1_000_000, initial=3000, label=_("Target size"))
    min_steps = forms.IntegerField(min_value=1, max_value=1000, initial=3, label=_("Minimum steps"))
    strata = forms.MultipleChoiceField(
        choices=[(name, STRATUM_NAMES.get(name, name)) for name in STRATUM_FIELDS], initial=list(DEFAULT_STRATA),
        widget=forms.CheckboxSelectMultiple, label=_("Stratify on"),
    )  # fmt: skip
    seed = forms.IntegerField(min_value=0, max_value=2**62, initial=0, label=_("Seed"))


class ExportForm(forms.Form):
    build = forms.ModelChoiceField(
        queryset=PEBenchBuild.objects.all(), required=False, empty_label=_("All of PEBench"), label=_("Build")
    )


class RunChoiceForm(forms.Form):
    """A step-by-step inference run the user may see."""

    inference_run = forms.ModelChoiceField(queryset=InferenceRun.objects.none(), label=_("Inference run"))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        runs = InferenceRun.objects.visible_to(user).filter(mode=InferenceRun.Mode.STEP_BY_STEP)
        self.runs = runs.select_related("endpoint")  # the choices, which the API offers too
        self.fields["inference_run"].queryset = self.runs


class ScoringChoiceForm(forms.Form):
    """A step-by-step scoring run of an inference run the user may see."""

    scoring_run = forms.ModelChoiceField(queryset=ScoringRun.objects.none(), label=_("Scoring run"))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        runs = ScoringRun.objects.filter(
            inference_run__in=InferenceRun.objects.visible_to(user), method=ScoringRun.Method.JUDGE_STEPS
        )
        self.runs = runs.select_related("judge")  # the choices, which the API offers too
        self.fields["scoring_run"].queryset = self.runs


class ChainFilterForm(forms.Form):
    status = forms.ChoiceField(choices=[*ANY, *ChainOfThought.Status.choices], required=False, label=_("Status"))
    subject = forms.ChoiceField(choices=[*ANY, *Subject.choices], required=False, label=_("Subject"))
    qtype = forms.ChoiceField(choices=[*ANY, *QuestionType.choices], required=False, label=_("Type"))
    stage = forms.ChoiceField(choices=[*ANY, *Stage.choices], required=False, label=_("Stage"))
    origin = forms.ChoiceField(choices=[*ANY, *ChainOfThought.Origin.choices], required=False, label=_("Origin"))
    pebench = forms.ChoiceField(
        choices=ANY + [("yes", _("In PEBench")), ("no", _("Not in PEBench"))], required=False, label=_("PEBench")
    )
    q = forms.CharField(required=False, max_length=200, label=_("Key or model"))

    def filter(self, chains, *, status: bool = True):
        """The chains matching the valid filters (an invalid form filters nothing); ``status=False`` skips that one."""
        data = self.cleaned_data if self.is_valid() else {}
        names = ("status", "subject", "qtype", "stage", "origin") if status else ("subject", "qtype", "stage", "origin")
        exact = {name: data[name] for name in names if data.get(name)}
        chains = chains.filter(**exact)
        if data.get("pebench"):
            chains = chains.filter(pebench_item__isnull=data["pebench"] == "no")
        if data.get("q"):
            chains = chains.filter(key__icontains=data["q"]) | chains.filter(model_name__icontains=data["q"])
        return chains
