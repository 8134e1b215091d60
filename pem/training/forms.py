"""Forms of the PEM-800K screens: import, filters, export, training, endpoint."""

from __future__ import annotations

import json

from django import forms
from django.utils.translation import gettext_lazy as _

from pem.models import FilterRun, StepLabel, TrainingExport
from pem.training import filters, formats, train
from pem.training.exports import DEFAULT_MAX_PIXELS, DEFAULT_MIN_PIXELS

# The fine-tuning formats by the tools that read them.
FORMAT_NAMES = {"llamafactory": "LLaMA-Factory", "swift": "ms-swift", "trl": "TRL", "qwen": "Qwen"}


class ImportForm(forms.Form):
    file = forms.FileField(label=_("PEM-800K JSONL file (or a zip holding one)"))
    name = forms.CharField(label=_("Name of the imported labels"), max_length=200, required=False)


def _label_source_choices() -> list[tuple[str, str]]:
    return [(f"{source}|{rater}", f"{StepLabel.Source(source).label}: {rater}")
            for source, rater in filters.label_sources()]  # fmt: skip


class FilterForm(forms.Form):
    labels = forms.ChoiceField(label=_("Labels to filter on"), choices=())
    min_steps = forms.IntegerField(label=_("Fewest steps"), min_value=0, initial=1)
    max_steps = forms.IntegerField(label=_("Most steps"), min_value=0, initial=60)
    max_text_mismatch = forms.IntegerField(label=_("Steps allowed whose text is not in the response"),
                                           min_value=0, initial=0)  # fmt: skip
    require_reason = forms.BooleanField(label=_("An error label needs a reason"), required=False, initial=True)
    check_final_answer = forms.BooleanField(label=_("All-correct labels need the reference answer at the end"),
                                            required=False, initial=True)  # fmt: skip
    min_models = forms.IntegerField(label=_("Different models per question, at least"), min_value=1, initial=3)
    target = forms.CharField(
        label=_("Balance target (JSON shares per category, empty for no balancing)"), required=False,
        initial='{"correct": 0.4, "CE": 0.1, "KAE": 0.1, "LRE": 0.1, "ICE": 0.1, "IAE": 0.1, "QM": 0.05, '
                '"LRK": 0.05}',
    )  # fmt: skip
    seed = forms.IntegerField(label=_("Seed"), min_value=0, max_value=2**32 - 1, initial=0)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["labels"].choices = _label_source_choices()

    def clean_target(self) -> dict:
        text = self.cleaned_data["target"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            raise forms.ValidationError(_("The balance target is not valid JSON.")) from None
        if not isinstance(value, dict):
            raise forms.ValidationError(_("The balance target must be an object of shares."))
        return value

    def source_and_params(self) -> tuple[str, str, dict]:
        data = self.cleaned_data
        source, rater = data["labels"].split("|", 1)
        params = {
            "format": {k: data[k] for k in ("min_steps", "max_steps", "max_text_mismatch")},
            "consistency": {k: data[k] for k in ("require_reason", "check_final_answer")},
            "coverage": {"min_models": data["min_models"]},
            "balance": {"target": data["target"], "seed": data["seed"]},
        }
        return source, rater, params


class ExportForm(forms.Form):
    filter_run = forms.ModelChoiceField(
        label=_("Filter run"), queryset=FilterRun.objects.filter(finished__isnull=False)
    )
    formats = forms.MultipleChoiceField(label=_("Formats"),
                                        choices=[(f, FORMAT_NAMES.get(f, f)) for f in formats.FORMATS],
                                        initial=list(formats.FORMATS), widget=forms.CheckboxSelectMultiple)  # fmt: skip
    min_pixels = forms.IntegerField(label=_("min_pixels"), min_value=1, initial=DEFAULT_MIN_PIXELS)
    max_pixels = forms.IntegerField(label=_("max_pixels"), min_value=1, initial=DEFAULT_MAX_PIXELS)
    style = forms.ChoiceField(label=_("Style"), choices=TrainingExport.Style.choices,
                              initial=TrainingExport.Style.STUDIO)  # fmt: skip


class TrainForm(forms.Form):
    export = forms.ModelChoiceField(
        label=_("Training export"), queryset=TrainingExport.objects.filter(status=TrainingExport.Status.DONE)
    )
    base_model = forms.CharField(label=_("Base model (a path or model id on the GPU workers)"), max_length=500,
                                 initial="Qwen/Qwen2.5-VL-7B-Instruct")  # fmt: skip
    max_steps = forms.IntegerField(label=_("Training steps"), min_value=1, initial=train.trainer.DEFAULTS["max_steps"])
    learning_rate = forms.FloatField(
        label=_("Learning rate"), min_value=0, initial=train.trainer.DEFAULTS["learning_rate"]
    )
    lora = forms.BooleanField(label=_("LoRA (peft)"), required=False, initial=True)

    def hyperparameters(self) -> dict:
        return {k: self.cleaned_data[k] for k in ("max_steps", "learning_rate", "lora")}


class EndpointForm(forms.Form):
    name = forms.CharField(label=_("Endpoint name"), max_length=100)
    # The served form (both or neither): the openai endpoint of the server serving the checkpoint.
    base_url = forms.CharField(label=_("Base URL of the server serving it (empty: a transformers endpoint)"),
                               max_length=300, required=False)  # fmt: skip
    served_name = forms.CharField(label=_("Served model name"), max_length=200, required=False)

    def clean(self) -> dict:
        data = super().clean() or {}
        half = train.half_served_form(base_url=data.get("base_url", ""), served_name=data.get("served_name", ""))
        if half is not None:
            self.add_error(half[0], half[1])
        return data
