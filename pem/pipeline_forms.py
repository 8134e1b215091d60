"""Forms of the PEM-800K pipeline screens: splitting by a model and the judge panel."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from inference.models import InferenceRun, ModelEndpoint, Protocol


class RunsChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, run: InferenceRun) -> str:
        return f"{run.name} (#{run.pk})"


def runs_field() -> RunsChoice:
    return RunsChoice(queryset=InferenceRun.objects.none(), widget=forms.CheckboxSelectMultiple,
                      label=_("Inference runs (their chains of thought)"))  # fmt: skip


class SplitForm(forms.Form):
    splitter = forms.ModelChoiceField(queryset=ModelEndpoint.objects.filter(active=True), label=_("Splitting model"))
    runs = runs_field()
    name = forms.CharField(max_length=200, required=False, label=_("Name"))
    min_coverage = forms.FloatField(min_value=0.01, max_value=1, initial=0.9, required=False,
                                    label=_("Share of the text a split must cover"))  # fmt: skip

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["runs"].queryset = InferenceRun.objects.visible_to(user).select_related("endpoint")


class PanelForm(forms.Form):
    name = forms.CharField(max_length=200, label=_("Name"))
    judges = forms.ModelMultipleChoiceField(queryset=ModelEndpoint.objects.filter(active=True),
                                            widget=forms.CheckboxSelectMultiple, label=_("Judge models"))  # fmt: skip
    runs = runs_field()
    threshold = forms.IntegerField(min_value=1, max_value=100, required=False,
                                   label=_("Votes a label needs (empty: a strict majority)"))  # fmt: skip
    explainer = forms.ModelChoiceField(queryset=ModelEndpoint.objects.filter(active=True), required=False,
                                       label=_("Explanations from (empty: the first majority judge)"))  # fmt: skip
    protocol = forms.ChoiceField(choices=Protocol.choices, initial=Protocol.STUDIO, required=False, label=_("Protocol"),
                                 help_text=_("How every judge of the panel is asked and read."))  # fmt: skip

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["runs"].queryset = InferenceRun.objects.visible_to(user).filter(mode="step_by_step")
