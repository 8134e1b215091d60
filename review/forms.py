from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.translation import gettext_lazy as _

from annotation.models import CandidateSet, Question, SourceDocument
from k12vista.roles import Role, people_with_role
from pem.models import PEBenchBuild
from review import sampling
from review.models import DIMENSIONS, Audit, Stage

PASS, FAIL = "pass", "fail"


def inspectors():
    """Active people holding the inspector role."""
    return people_with_role(Role.INSPECTOR)


class AuditForm(forms.Form):
    name = forms.CharField(label=_("Name"), max_length=200, required=False)
    population = forms.ChoiceField(label=_("Population"), choices=Audit.Population.choices,
                                   initial=Audit.Population.STATUS, widget=forms.RadioSelect)  # fmt: skip
    status = forms.ChoiceField(label=_("Lifecycle status"), choices=Question.Status.choices,
                               initial=Question.Status.SOLUTION_CORRECTED, required=False)  # fmt: skip
    hash_ids = forms.CharField(label=_("Batch: question hash ids, one per line"), required=False,
                               widget=forms.Textarea(attrs={"rows": 3}))  # fmt: skip
    source_document = forms.ModelChoiceField(label=_("Import"), queryset=SourceDocument.objects.all(),
                                             required=False)  # fmt: skip
    candidate_set = forms.ModelChoiceField(label=_("Candidate set"), queryset=CandidateSet.objects.all(),
                                           required=False)  # fmt: skip
    build = forms.ModelChoiceField(label=_("PEBench build (empty: every PEBench item)"),
                                   queryset=PEBenchBuild.objects.all(), required=False)  # fmt: skip
    strata = forms.MultipleChoiceField(label=_("Strata"), choices=Audit.Stratum.choices, initial=["subject"],
                                       widget=forms.CheckboxSelectMultiple)  # fmt: skip
    size_rule = forms.ChoiceField(label=_("Sample size"), choices=Audit.SizeRule.choices,
                                  initial=Audit.SizeRule.FIXED, widget=forms.RadioSelect)  # fmt: skip
    per_stratum = forms.IntegerField(label=_("Items per stratum"), min_value=1, initial=200, required=False)
    aql = forms.TypedChoiceField(label=_("AQL (%)"), coerce=float, required=False, initial="1.0",
                                 choices=[(h, h) for h in sampling.AQL_HEADINGS])  # fmt: skip
    seed = forms.IntegerField(label=_("Random seed (empty: a new one, recorded)"), required=False, min_value=0,
                              max_value=2**62)  # fmt: skip
    inspectors = forms.ModelMultipleChoiceField(label=_("Inspectors"), queryset=inspectors(),
                                                widget=forms.CheckboxSelectMultiple)  # fmt: skip
    inspectors_per_item = forms.IntegerField(label=_("Inspectors per item"), min_value=1, max_value=20)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["inspectors"]
        assert isinstance(field, forms.ModelMultipleChoiceField)  # declared above
        field.queryset = inspectors()
        self.fields["inspectors_per_item"].initial = settings.AUDIT_INSPECTORS_PER_ITEM

    def clean(self) -> dict:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns
        kind = data.get("population")
        population: dict[str, Any] = {"kind": kind}
        if kind == Audit.Population.STATUS:
            population["status"] = data.get("status") or Question.Status.SOLUTION_CORRECTED
        elif kind == Audit.Population.BATCH:
            population["hash_ids"] = list(dict.fromkeys((data.get("hash_ids") or "").split()))
            if not population["hash_ids"]:
                self.add_error("hash_ids", _("List the hash ids of the questions in the batch."))
        elif kind == Audit.Population.IMPORT:
            if data.get("source_document") is None:
                self.add_error("source_document", _("Choose the import."))
            else:
                population["source_document"] = data["source_document"].pk
        elif kind == Audit.Population.PEBENCH:
            population["build"] = data["build"].pk if data.get("build") else None
        elif kind == Audit.Population.CANDIDATE_SET:
            if data.get("candidate_set") is None:
                self.add_error("candidate_set", _("Choose the candidate set."))
            else:
                population["candidate_set"] = data["candidate_set"].pk
        data["population_spec"] = population
        if data.get("size_rule") == Audit.SizeRule.FIXED and not data.get("per_stratum"):
            self.add_error("per_stratum", _("Give the number of items per stratum."))
        if data.get("size_rule") == Audit.SizeRule.PLAN and data.get("aql") in (None, ""):
            self.add_error("aql", _("Choose the AQL."))
        return data

    def audit_arguments(self) -> dict:
        data = self.cleaned_data
        plan = data["size_rule"] == Audit.SizeRule.PLAN
        return {
            "name": data.get("name") or "",
            "population": data["population_spec"],
            "strata": data["strata"],
            "per_stratum": None if plan else data["per_stratum"],
            "aql": data["aql"] if plan else None,
            "seed": data.get("seed"),
            "inspectors": list(data["inspectors"]),
            "inspectors_per_item": data["inspectors_per_item"],
        }


class RatingForm(forms.Form):
    """Pass or fail with a note, for each dimension of the item's kind."""

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dimensions = DIMENSIONS[kind]
        for name, label in self.dimensions:
            self.fields[name] = forms.ChoiceField(label=label, choices=[(PASS, _("Pass")), (FAIL, _("Fail"))],
                                                  widget=forms.RadioSelect)  # fmt: skip
            self.fields[f"{name}_note"] = forms.CharField(
                label=_("Note"), required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 2})
            )

    @classmethod
    def for_rating(cls, rating: Any, data: Any = None) -> RatingForm:
        initial = {}
        for name, passed in rating.verdicts.items():
            initial[name] = PASS if passed else FAIL
            initial[f"{name}_note"] = rating.notes.get(name, "")
        return cls(data, kind=rating.item.kind, initial=initial)

    def rows(self) -> list[tuple[forms.BoundField, forms.BoundField]]:
        return [(self[name], self[f"{name}_note"]) for name, _label in self.dimensions]

    def verdicts(self) -> dict[str, bool]:
        return {name: self.cleaned_data[name] == PASS for name, _label in self.dimensions}

    def notes(self) -> dict[str, str]:
        return {name: self.cleaned_data[f"{name}_note"] for name, _label in self.dimensions}


class ReworkForm(forms.Form):
    stage = forms.ChoiceField(label=_("Send back to"), choices=Stage.choices)
    note = forms.CharField(label=_("Note for the annotator"), max_length=4000, widget=forms.Textarea(attrs={"rows": 3}))
    annotator = forms.ModelChoiceField(label=_("Annotator (empty: whoever did the work)"), required=False,
                                       queryset=get_user_model().objects.none())  # fmt: skip

    def __init__(self, *args: Any, stages: list[str], may_choose_annotator: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stage, annotator = self.fields["stage"], self.fields["annotator"]
        assert isinstance(stage, forms.ChoiceField) and isinstance(annotator, forms.ModelChoiceField)  # as declared
        stage.choices = [(s, Stage(s).label) for s in stages]
        if may_choose_annotator:
            annotator.queryset = people_with_role(Role.ANNOTATOR)
        else:
            del self.fields["annotator"]
