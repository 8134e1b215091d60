import copy
import re
from typing import TYPE_CHECKING

from django import forms
from django.conf import settings
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from annotation.forms import QuestionFilterForm
from annotation.models import Release
from inference import client, services
from inference.models import (
    AssistRun,
    InferenceRun,
    ModelEndpoint,
    PromptTemplate,
    Protocol,
    ScoringRun,
    validate_default_params,
)  # fmt: skip
from inference.reference.register import registered_sets
from k12vista.forms import StorableJSONField

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class URLLinesField(forms.CharField):
    """A list of URLs typed one per line (blank lines dropped); checked by services.save_endpoint."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""  # None only with empty_value=None, which no form sets
        return [line.strip() for line in text.splitlines() if line.strip()]


class EndpointForm(forms.ModelForm):
    """The URLs are checked by services.save_endpoint (the allowlist lives there), not here."""

    max_concurrency = forms.IntegerField(
        min_value=1, max_value=512, initial=8, label=_("Requests in flight at most"),
        help_text=_("For each server: with replicas, the endpoint's limit is the sum of its servers'."),
    )  # fmt: skip
    replica_urls = URLLinesField(
        required=False, max_length=64 * 310, label=_("Replica URLs"),
        help_text=_("More servers of the same model, one base URL a line (vllm serve behind separate ports or "
                    "hosts): calls go to the least busy, and one that fails is set aside for a while."),
    )  # fmt: skip

    # Only the offline engine reads these: required for it (gpu_need); a form sent without them (an HTTP
    # endpoint's) keeps what the endpoint has.
    gpu_count = forms.IntegerField(
        required=False, min_value=1, max_value=64, label=_("GPUs needed"),
        help_text=ModelEndpoint._meta.get_field("gpu_count").help_text,
    )  # fmt: skip
    gpu_memory_gib = forms.IntegerField(
        required=False, min_value=0, max_value=4096, label=_("memory per GPU needed (GiB)"),
        help_text=ModelEndpoint._meta.get_field("gpu_memory_gib").help_text,
    )  # fmt: skip

    class Meta:
        model = ModelEndpoint
        fields = [
            "name", "kind", "base_url", "replica_urls", "model_name", "api_key_env", "max_concurrency",
            "timeout_seconds", "accepts_images", "max_image_side", "supports_json_schema", "default_params", "active",
            "judge_prompt", "gpu_count", "gpu_memory_gib",
        ]  # fmt: skip
        field_classes = {"default_params": StorableJSONField}
        help_texts = {
            "judge_prompt": _(
                "A trained step judge, served or on this worker: the prompt it learnt on, which its step-by-step "
                "scoring uses."
            ),
            "api_key_env": _("Only the variable's name, such as OPENAI_API_KEY; the key itself is never stored."),
            "default_params": _('Sampling parameters as JSON, such as {"temperature": 0}.'),
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only a trained judge's own prompt: the studio's and a reference set's step-judge prompts.
        kind, field = PromptTemplate.Kind, self.fields["judge_prompt"]
        assert isinstance(field, forms.ModelChoiceField)  # the model's foreign key
        field.queryset = PromptTemplate.objects.filter(
            Q(kind=kind.JUDGE_STEPS_TRAINED) | (Q(kind=kind.JUDGE_STEPS) & ~Q(prompt_set=""))
        )

    def clean_api_key_env(self) -> str:
        # A pasted key (sk-..., with dashes or dots) is refused here, before it could be saved.
        name = self.cleaned_data["api_key_env"].strip()
        if name and not ENV_NAME.match(name):
            raise forms.ValidationError(_("Give the name of an environment variable (letters, digits, _), not a key."))
        if name and not client.key_variable_declared(name):
            raise forms.ValidationError(
                _("%(name)s is not one of the key variables an administrator declared (MODEL_API_KEY_VARIABLES: "
                  "%(declared)s).") % {"name": name, "declared": ", ".join(settings.MODEL_API_KEY_VARIABLES)}
            )  # fmt: skip
        return name

    def clean_gpu_count(self) -> int:
        return self.gpu_need("gpu_count")

    def clean_gpu_memory_gib(self) -> int:
        return self.gpu_need("gpu_memory_gib")

    def gpu_need(self, name: str) -> int:
        """An offline engine's GPU need left blank is refused, as the form's other numbers are (a
        cleared field silently became 1 GPU, or any card); the other kinds never read it, and a blank
        keeps what the endpoint has (a new one's default)."""
        value = self.cleaned_data[name]
        if value is not None:
            return value
        if self.cleaned_data.get("kind") == ModelEndpoint.Kind.VLLM_OFFLINE:
            raise forms.ValidationError(self.fields[name].error_messages["required"], code="required")
        return getattr(self.instance, name)

    def clean(self):
        cleaned = super().clean()
        # As the API: a replica or base URL typed for an engine is refused, not silently dropped on save.
        for name, why in services.fields_its_kind_never_uses(cleaned.get("kind", ""), cleaned).items():
            self.add_error(name, why)
        return cleaned

    def clean_default_params(self):
        value = self.cleaned_data["default_params"]
        if value in (None, ""):
            return {}
        validate_default_params(value)
        return value


class PromptForm(forms.Form):
    name = forms.CharField(max_length=200, label=_("Name"))
    system = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False, label=_("System prompt"))
    user_template = forms.CharField(widget=forms.Textarea(attrs={"rows": 14}), label=_("User prompt template"))


class ReferenceCheckoutForm(forms.Form):
    path = forms.CharField(
        max_length=1000, label=_("Folder of the reference checkout"),
        help_text=_("On the studio's server, inside the reference folder its administrator set (a relative "
                    "name is taken from there): the folder holding K12_Vista/ and K12_PEMBench/. Its prompt files "
                    "are read, never run."),
    )  # fmt: skip


def _filter_field(name: str) -> forms.Field:
    # The question bank's own filter fields, so a run's question set is chosen exactly as the browser does.
    return copy.deepcopy(QuestionFilterForm.base_fields[name])


class RunForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, label=_("Name"))
    endpoint = forms.ModelChoiceField(queryset=ModelEndpoint.objects.filter(active=True), label=_("Endpoint"))
    mode = forms.ChoiceField(choices=InferenceRun.Mode.choices, label=_("Mode"))
    input_form = forms.ChoiceField(
        choices=InferenceRun.InputForm.choices, initial=InferenceRun.InputForm.IMAGES, label=_("Input")
    )
    protocol = forms.ChoiceField(
        choices=Protocol.choices, initial=Protocol.STUDIO, required=False, label=_("Protocol"),
        help_text=_("Reference: the question put as the K12Vista reference code puts it (a registered reference "
                    "prompt, no system message, the stored image first, sampling left to the server)."),
    )  # fmt: skip
    prompt_set = forms.ChoiceField(required=False, label=_("Reference prompt set"))
    subject = _filter_field("subject")
    grade = _filter_field("grade")
    stage = _filter_field("stage")
    qtype = _filter_field("qtype")
    status = _filter_field("status")
    release = forms.TypedChoiceField(coerce=int, required=False, empty_value=None, label=_("Release"))
    temperature = forms.FloatField(required=False, min_value=0, max_value=2, label=_("Temperature"))
    max_tokens = forms.IntegerField(required=False, min_value=1, max_value=200_000, label=_("Max tokens"))
    top_p = forms.FloatField(required=False, min_value=0, max_value=1, label=_("Top p"))
    seed = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1, label=_("Seed"))

    FILTERS = ("subject", "grade", "stage", "qtype", "status", "release")
    PARAMS = ("temperature", "max_tokens", "top_p")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        published = Release.objects.filter(status=Release.Status.PUBLISHED).order_by("-version")
        release = self.fields["release"]
        assert isinstance(release, forms.ChoiceField)  # as declared
        release.choices = [("", "—"), *((r.version, f"v{r.version} {r.name}") for r in published)]
        if isinstance(prompt_set := self.fields.get("prompt_set"), forms.ChoiceField):
            sets = [entry["name"] for entry in registered_sets()]
            prompt_set.choices = [("", _("the newest registered")), *((n, n) for n in sets)]

    def fieldsets(self) -> list[tuple["StrOrPromise", list[forms.BoundField]]]:
        return [
            (_("Model"), [self[name] for name in ("name", "endpoint", "mode", "input_form", "protocol", "prompt_set")]),
            (_("Questions"), [self[name] for name in self.FILTERS]),
            (_("Sampling (empty: the endpoint's defaults)"), [self[name] for name in (*self.PARAMS, "seed")]),
        ]

    def filters(self) -> dict:
        return {k: self.cleaned_data[k] for k in self.FILTERS if self.cleaned_data.get(k) not in (None, "")}

    def params(self) -> dict:
        return {k: self.cleaned_data[k] for k in self.PARAMS if self.cleaned_data.get(k) is not None}


class ScoringForm(forms.Form):
    judge = forms.ModelChoiceField(queryset=ModelEndpoint.objects.filter(active=True), label=_("Judge endpoint"))
    method = forms.ChoiceField(choices=ScoringRun.Method.choices, label=_("Method"))
    protocol = forms.ChoiceField(choices=Protocol.choices, initial=Protocol.STUDIO, required=False, label=_("Protocol"))


class PublishedUploadForm(forms.Form):
    file = forms.FileField(label=_("CSV file (model, mode, group, score, source)"),
                           widget=forms.ClearableFileInput(attrs={"accept": ".csv,text/csv"}))  # fmt: skip
    scale = forms.ChoiceField(
        choices=[("auto", _("Decide from the file")), ("percent", _("Percent")), ("fraction", _("Fraction 0-1"))],
        initial="auto",
        label=_("Score scale"),
    )

    MAX_BYTES = 2 * 1024 * 1024

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > self.MAX_BYTES:
            raise forms.ValidationError(_("The file is larger than 2 MB."))
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise forms.ValidationError(_("The file is not UTF-8 text.")) from exc


class FilterRunChoice(forms.ModelMultipleChoiceField):
    def label_from_instance(self, run: AssistRun) -> str:
        return f"{run.name} · {run.endpoint.model_name} (#{run.pk})"


class FilterRunSingleChoice(forms.ModelChoiceField):
    def label_from_instance(self, run: AssistRun) -> str:
        return f"{run.name} · {run.endpoint.model_name} (#{run.pk})"


class DifficultyFilterForm(forms.Form):
    """Which filter runs to combine. Runs of any state are offered: the service
    says clearly which are not finished or not scored, rather than hiding them."""

    small = FilterRunChoice(queryset=AssistRun.objects.none(), required=False,
                            widget=forms.CheckboxSelectMultiple, label=_("Small-model runs"))  # fmt: skip
    text_only = FilterRunSingleChoice(queryset=AssistRun.objects.none(), required=False,
                                      label=_("Text-only run (answers without the image)"))  # fmt: skip
    fingerprint = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, runs=None, **kwargs):
        super().__init__(*args, **kwargs)
        runs = (runs if runs is not None else AssistRun.objects.all()).select_related("endpoint", "job")
        self.fields["small"].queryset = runs.filter(kind=AssistRun.Kind.SMALL_MODEL_FILTER)
        self.fields["text_only"].queryset = runs.filter(kind=AssistRun.Kind.TEXT_ONLY_FILTER)

    def clean(self):
        data = super().clean()
        if not data.get("small") and not data.get("text_only"):
            raise forms.ValidationError(_("Choose at least one small-model run or a text-only run."))
        return data


class CampaignForm(RunForm):
    """A run's question set, mode and sampling, for several endpoints at once."""

    name = forms.CharField(max_length=200, label=_("Name"))
    endpoints = forms.ModelMultipleChoiceField(queryset=ModelEndpoint.objects.filter(active=True),
                                               widget=forms.CheckboxSelectMultiple, label=_("Endpoints"))  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        del self.fields["endpoint"]

    def fieldsets(self) -> list[tuple["StrOrPromise", list[forms.BoundField]]]:
        fields = ("name", "endpoints", "mode", "input_form", "protocol", "prompt_set")
        return [
            (_("Models"), [self[name] for name in fields]),
            (_("Questions"), [self[name] for name in self.FILTERS]),
            (_("Sampling (empty: each endpoint's defaults)"), [self[name] for name in (*self.PARAMS, "seed")]),
        ]
