"""What the pem app's jobs (PEBench, PEM-800K, training, panels, splitting) are started with and answer
(issue 29), declared with their handlers (``job_handler(kind, params=..., result=...)``) and typed in the
API's schema per kind."""

from __future__ import annotations

from rest_framework import serializers

from k12vista.job_shapes import KeyedLine, LineReportResult, ReleaseBuilt, WrittenFile

# --- pem.import_pebench, pem.import_pem800k ------------------------------------------------


class ImportFileParams(serializers.Serializer):
    file = serializers.CharField(help_text="the upload's name in storage")
    name = serializers.CharField(allow_blank=True, help_text="the rater of its labels")


class ChainsImportResult(LineReportResult):
    """services.ImportReport.as_dict: the line report, with the lines updated and those warned about."""

    updated = serializers.IntegerField()
    warnings = serializers.IntegerField()
    warning_lines = KeyedLine(many=True)
    warning_lines_truncated = serializers.BooleanField()


class Pem800kParams(serializers.Serializer):
    path = serializers.CharField(help_text="a file the workers read")
    name = serializers.CharField(allow_blank=True, help_text="the rater of its labels")


class Pem800kResult(ChainsImportResult):
    questions_missing = serializers.IntegerField(help_text="chains whose question is not in the bank")
    rater = serializers.CharField()


# --- pem.build_pebench, pem.export_pebench, pem.build_pebench_release ---------------------------


class BuildPebenchParams(serializers.Serializer):
    target_size = serializers.IntegerField()
    min_steps = serializers.IntegerField()
    strata = serializers.ListField(child=serializers.CharField())
    seed = serializers.IntegerField()


class StratumTaken(serializers.Serializer):
    available = serializers.IntegerField()
    taken = serializers.IntegerField()


class BuildPebenchResult(serializers.Serializer):
    build_id = serializers.IntegerField()
    taken = serializers.IntegerField()
    shortfall = serializers.IntegerField()
    strata = serializers.DictField(child=StratumTaken(), help_text="keyed by stratum")


class ExportPebenchParams(serializers.Serializer):
    build_id = serializers.IntegerField(allow_null=True, help_text="a build, or null: all of PEBench")


class ExportPebenchResult(WrittenFile):
    reference_items = serializers.IntegerField()
    items_without_gold = serializers.IntegerField()


class PebenchReleaseBuilt(ReleaseBuilt):
    items = serializers.IntegerField(required=False)


# --- pem.cots_from_run, pem.labels_from_scoring_run ----------------------------------------


class InferenceRunParams(serializers.Serializer):
    inference_run_id = serializers.IntegerField()


class CotsFromRunResult(serializers.Serializer):
    """chains.cots_from_run: the run's responses by what they came to."""

    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    updated = serializers.IntegerField()
    conflict = serializers.IntegerField()
    no_steps = serializers.IntegerField()
    not_answered = serializers.IntegerField()
    responses = serializers.IntegerField()
    conflict_keys = serializers.ListField(child=serializers.CharField(), help_text="the first ones")


class ScoringRunParams(serializers.Serializer):
    scoring_run_id = serializers.IntegerField()


class DifferentSplit(serializers.Serializer):
    key = serializers.CharField()
    kind = serializers.CharField(help_text="how it was aligned")


class LabelsFromScoringResult(serializers.Serializer):
    """chains.labels_from_scoring_run."""

    labelled = serializers.IntegerField()
    no_chain_of_thought = serializers.IntegerField()
    no_judged_steps = serializers.IntegerField()
    not_scored = serializers.IntegerField()
    different_step_counts = serializers.IntegerField()
    unlabelled_gold_steps = serializers.IntegerField()
    unmatched_judge_steps = serializers.IntegerField()
    alignment = serializers.DictField(child=serializers.IntegerField(), help_text="chains per alignment kind")
    different = DifferentSplit(many=True)
    judge = serializers.CharField()


# --- pem.agreement -------------------------------------------------------------------------


class AgreementParams(serializers.Serializer):
    scope = serializers.CharField(help_text="all or pebench")


class AgreementResult(serializers.Serializer):
    scope = serializers.CharField()
    labels = serializers.IntegerField(help_text="labels counted when it was computed")
    seconds = serializers.FloatField()


# --- pem.filter_pem800k, pem.export_training, pem.train_pem ---------------------------------


class FilterRunParams(serializers.Serializer):
    filter_run_id = serializers.IntegerField()


class FilterRunResult(serializers.Serializer):
    filter_run = serializers.IntegerField()
    input = serializers.IntegerField(help_text="chains read")
    kept = serializers.IntegerField()


class TrainingExportParams(serializers.Serializer):
    export_id = serializers.IntegerField()


class TrainingExportResult(serializers.Serializer):
    export = serializers.IntegerField()
    records = serializers.IntegerField()
    images = serializers.IntegerField()
    marked = serializers.IntegerField(help_text="chains marked as training data")
    manifest_sha256 = serializers.CharField()
    directory = serializers.CharField()


class TrainingRunParams(serializers.Serializer):
    training_run_id = serializers.IntegerField()


class TrainingResult(serializers.Serializer):
    training_run = serializers.IntegerField()
    checkpoint = serializers.CharField(help_text="relative to the media root")
    global_step = serializers.IntegerField()
    train_loss = serializers.FloatField()
    runtime_s = serializers.FloatField()


# --- pem.panel, pem.split ------------------------------------------------------------------


class PanelParams(serializers.Serializer):
    panel_run_id = serializers.IntegerField()


class PanelResult(serializers.Serializer):
    """panel.vote's counts, ``labels`` replaced by the chains each judge's labels were aligned on."""

    judges = serializers.ListField(child=serializers.CharField())
    threshold = serializers.IntegerField(allow_null=True)
    explainer = serializers.CharField(allow_blank=True)
    chains = serializers.IntegerField()
    chains_fully_decided = serializers.IntegerField()
    chains_with_no_majority = serializers.IntegerField()
    steps = serializers.IntegerField()
    decided = serializers.IntegerField()
    no_majority = serializers.IntegerField()
    missing_votes = serializers.DictField(child=serializers.IntegerField(), help_text="judge -> steps without vote")
    labels = serializers.DictField(child=serializers.IntegerField(), help_text="judge -> chains labelled")


class SplitParams(serializers.Serializer):
    split_run_id = serializers.IntegerField()


class SplitCounts(serializers.Serializer):
    """splitting.counts: chains per outcome, and the total."""

    pending = serializers.IntegerField()
    model = serializers.IntegerField()
    fallback = serializers.IntegerField()
    conflict = serializers.IntegerField()
    skipped = serializers.IntegerField()
    total = serializers.IntegerField()


# --- pem.pebench_given_steps ---------------------------------------------------------------


class GivenStepsParams(serializers.Serializer):
    judge_id = serializers.IntegerField()
    prompt_id = serializers.IntegerField()
    rater = serializers.CharField()


class LabelAccuracy(serializers.Serializer):
    correct = serializers.IntegerField()
    count = serializers.IntegerField()
    accuracy = serializers.FloatField(allow_null=True, help_text="null when no gold step has this label")
    rounded = serializers.FloatField(help_text="as the reference writes it: 4 places, 0 when empty")


class GivenStepsReport(serializers.Serializer):
    rater = serializers.CharField()
    items = serializers.IntegerField(help_text="PEBench items the judge labelled (replies that never read: none)")
    metric = serializers.DictField(
        child=LabelAccuracy(), help_text='"all" (the overall micro accuracy), then each gold label\'s Chinese name'
    )


class GivenStepsResult(serializers.Serializer):
    asked = serializers.IntegerField()
    read = serializers.IntegerField()
    not_read = serializers.IntegerField()
    call_failed = serializers.IntegerField()
    report = GivenStepsReport()
