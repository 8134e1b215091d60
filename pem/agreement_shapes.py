"""The agreement statistics' shapes in the OpenAPI schema (issue 29): one serializer for each dict that
pem.agreement, pem.ratings and pem.reports build, so that a ratings file's report and a PEBench release's
agreement report are typed key by key. They describe answers only (nothing is read through them): the
answers are the dicts as those functions return them (docs/agreement.md)."""

from __future__ import annotations

from rest_framework import serializers

from k12vista.schema_fields import EstimateOutput, ProportionOutput, keyed
from pem.ratings import SCALES


class RawAgreementOutput(ProportionOutput):
    """Units on which every rating is the same (pem.agreement.raw_agreement), and the mean pairwise agreement."""

    pairwise = serializers.FloatField(allow_null=True, help_text="Fleiss's P-bar; null when no unit is pairable")


class AlphaOutput(EstimateOutput):
    """Krippendorff's alpha (pem.agreement.krippendorff_alpha and its interval form on scores)."""

    metric = serializers.ChoiceField(choices=SCALES)


class AC1Output(EstimateOutput):
    """Gwet's AC1 (pem.agreement.gwet_ac1)."""

    categories = serializers.IntegerField(required=False, help_text="q used; absent with fewer than two categories")


class MacroF1Output(serializers.Serializer):
    """Mean F1 over the categories present (pem.agreement.macro_f1)."""

    value = serializers.FloatField(allow_null=True)
    undefined = serializers.CharField(allow_null=True)
    per_category = serializers.ListField(
        child=serializers.FloatField(allow_null=True), help_text="in the categories' order; null: never present"
    )


class PeopleStatistics(serializers.Serializer):
    """Every multi-rater statistic on one count matrix (pem.agreement.people_statistics) and the two-rater
    ones pooled over every pair of ratings of a unit (two_rater_statistics)."""

    raw_agreement = RawAgreementOutput()
    fleiss_kappa = EstimateOutput()
    krippendorff_alpha = AlphaOutput()
    gwet_ac1 = AC1Output()
    cohen_kappa = EstimateOutput()
    scott_pi = EstimateOutput()


class BinaryStatistics(PeopleStatistics):
    """The same statistics on the collapse correct vs error."""

    categories = serializers.ListField(child=serializers.CharField(), help_text='["correct", "error"]')


class LabelUnits(serializers.Serializer):
    total = serializers.IntegerField()
    rated = serializers.IntegerField()
    single_rating = serializers.IntegerField()
    pairable = serializers.IntegerField()
    ratings = serializers.IntegerField()


class RaterPair(serializers.Serializer):
    raters = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
    units = serializers.IntegerField()
    agreement = ProportionOutput()
    cohen_kappa = EstimateOutput()


class RaterUsage(serializers.Serializer):
    rater = serializers.CharField()
    ratings = serializers.IntegerField()
    never_used = serializers.ListField(child=serializers.CharField(), help_text="categories, in order")


class LabelAgreement(serializers.Serializer):
    label = serializers.CharField()  # type: ignore[assignment]  # answer key "label", off the class (DRF's metaclass)
    ratings = serializers.IntegerField()
    agreement = ProportionOutput(help_text="of the units someone put in this category, the share everyone did")
    kappa = EstimateOutput(help_text="Fleiss's kappa of this category against the others")


class LabelStatistics(PeopleStatistics):
    """Labels (or scores on a nominal or ordinal scale) between raters (pem.agreement.label_statistics)."""

    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                      help_text="pooled pairs of ratings; rows: the rater first by name")  # fmt: skip
    units = LabelUnits()
    pairs = RaterPair(many=True)
    raters = RaterUsage(many=True)
    per_label = LabelAgreement(many=True)
    binary = BinaryStatistics(required=False, help_text="the nine step labels only: correct vs error")


class ScoreUnits(serializers.Serializer):
    total = serializers.IntegerField()
    single_rating = serializers.IntegerField()
    pairable = serializers.IntegerField()


class ScoreStatistics(serializers.Serializer):
    """Scores on an interval scale between raters (pem.ratings._score_statistics)."""

    krippendorff_alpha = AlphaOutput()
    exact_agreement = ProportionOutput(help_text="pairable units on which every score is the same")
    mean_absolute_difference = serializers.FloatField(allow_null=True, help_text="over every pair; null without one")
    units = ScoreUnits()


class LabelRaterAgainstReference(serializers.Serializer):
    """One rater's labels against the reference rater's (pem.ratings._against_reference)."""

    rater = serializers.CharField()
    units = serializers.IntegerField(help_text="units both rated")
    accuracy = ProportionOutput()
    accuracy_by_reference = keyed(ProportionOutput(), "the reference's category")
    cohen_kappa = EstimateOutput()
    macro_f1 = MacroF1Output()


class ScoreAgreementOutput(serializers.Serializer):
    """Paired scores, reference then rated (pem.ratings.score_agreement): with no pair, units and alpha only."""

    units = serializers.IntegerField()
    krippendorff_alpha = AlphaOutput()
    mean_absolute_difference = serializers.FloatField(required=False)
    pearson_r = serializers.FloatField(required=False, allow_null=True, help_text="null when a side does not vary")
    exact_agreement = ProportionOutput(required=False)
    weighted_kappa = EstimateOutput(required=False, help_text="only when every score is in [0, 1]: on tenths")
    binary_kappa = EstimateOutput(required=False, help_text="only when every score is in [0, 1]: at 0.5")


class ScoreRaterAgainstReference(ScoreAgreementOutput):
    rater = serializers.CharField()


class LabelsAgainstReference(serializers.Serializer):
    reference = serializers.CharField()
    raters = LabelRaterAgainstReference(many=True)


class ScoresAgainstReference(serializers.Serializer):
    reference = serializers.CharField()
    raters = ScoreRaterAgainstReference(many=True)


class RatingsReportBase(serializers.Serializer):
    """What a ratings file's report says of the file (pem.ratings.ratings_report)."""

    kind = serializers.CharField(help_text="label or score")
    format = serializers.CharField(help_text="csv or jsonl")
    scale = serializers.ChoiceField(choices=SCALES)
    items = serializers.IntegerField()
    raters = serializers.ListField(child=serializers.CharField())
    ratings = serializers.IntegerField()
    notes = serializers.ListField(child=serializers.CharField())


class LabelRatingsReport(RatingsReportBase):
    """Labels, or scores on a nominal or ordinal scale (their distinct values are the categories)."""

    categories = serializers.ListField(child=serializers.CharField(), help_text="in order")
    statistics = LabelStatistics()
    against_reference = LabelsAgainstReference(required=False, help_text="only with a reference rater")


class ScoreRatingsReport(RatingsReportBase):
    """Scores on an interval scale."""

    statistics = ScoreStatistics()
    against_reference = ScoresAgainstReference(required=False, help_text="only with a reference rater")


# --- a PEBench release's agreement report (pem.reports.agreement_report) --------------------------------------


class GoldCounts(serializers.Serializer):
    steps = serializers.IntegerField()
    items = serializers.IntegerField(help_text="items with gold on every step")
    distribution = keyed(serializers.IntegerField(), "step label: gold steps with it")


class JudgeBinary(serializers.Serializer):
    accuracy = ProportionOutput()
    cohen_kappa = EstimateOutput()


class FirstWrongStep(serializers.Serializer):
    """ProcessBench's task (pem.agreement.first_wrong_step)."""

    agreement = ProportionOutput()
    erroneous = ProportionOutput()
    correct = ProportionOutput()
    f1 = serializers.FloatField(allow_null=True)


class JudgeAgainstGold(serializers.Serializer):
    """One judge (model, panel or import) against gold (pem.reports._judge)."""

    source = serializers.CharField(help_text="model, panel or imported")  # type: ignore[assignment]  # answer key "source"
    rater = serializers.CharField()
    scoring_runs = serializers.ListField(child=serializers.IntegerField())
    items = serializers.IntegerField()
    steps = serializers.IntegerField(help_text="gold steps of the items it labelled")
    coverage = ProportionOutput()
    accuracy = ProportionOutput(help_text="micro, as Table 9's Overall")
    accuracy_by_label = keyed(ProportionOutput(), "gold step label")
    macro_accuracy = serializers.FloatField(allow_null=True)
    cohen_kappa = EstimateOutput()
    macro_f1 = MacroF1Output()
    binary = JudgeBinary()
    first_wrong_step = FirstWrongStep()
    confusion = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                      help_text="gold rows; judge columns, the last: no label")  # fmt: skip


class AlignmentKinds(serializers.Serializer):
    identical = serializers.IntegerField()
    realigned = serializers.IntegerField()
    partial = serializers.IntegerField()  # type: ignore[assignment]  # answer key "partial"


class AlignmentSummary(serializers.Serializer):
    scoring_run = serializers.IntegerField()
    name = serializers.CharField()
    judge = serializers.CharField()
    items = serializers.IntegerField()
    same_count = serializers.IntegerField()
    different_count = serializers.IntegerField()
    kinds = AlignmentKinds()
    unmatched_judge_steps = serializers.IntegerField()


class StepAgreementReport(serializers.Serializer):
    """The agreement report over chains of thought (pem.reports.agreement_report): people with people on the
    steps' labels, gold, and each judge against gold. Stored empty until a release's build computes it."""

    categories = serializers.ListField(child=serializers.CharField(), required=False)
    ac1_categories = serializers.IntegerField(required=False)
    items = serializers.IntegerField(required=False)
    steps = serializers.IntegerField(required=False)
    people = LabelStatistics(required=False)
    gold = GoldCounts(required=False)
    judges = JudgeAgainstGold(many=True, required=False)
    alignment = AlignmentSummary(many=True, required=False)
