"""Leaderboards from scored responses: pure computation on plain data.

Sections: :mod:`.core` (groups and types), :mod:`.statistics` (cells,
intervals, building), :mod:`.formats` (CSV, JSON, LaTeX and the definitions
they state) and :mod:`.published` (numbers others published).

The caller (the lead's database code) feeds one :class:`ScoredItem` per model,
evaluation mode and question; :func:`build_leaderboard` returns a
:class:`Leaderboard` holding, for every (model, mode):

* score cells (:class:`Cell`) for ``overall``, each stage (``stage:primary``),
  each subject (``subject:math``), each question type (``type:fill_in_blank``)
  each subject-stage cell of the reference release (``cell:math-g9``, see
  :func:`k12vista.vocabulary.release_tag`) and each cell of the paper's grid,
  question type x subject-grade (``grid:multiple_choice:math-g9``); tags outside
  the release (primary physics) get cells of their own (:func:`in_release`);
* error-type distributions (:class:`ErrorDistribution`) of the eight error
  labels (CS excluded from the denominator) for every one of those groups.

Scores and what is missing
--------------------------
An item's score is a float in [0, 1] (direct mode: the mean of the judge's 0/1
sub-answer marks; step-by-step mode: correct steps / steps), or ``None`` when the
response could not be parsed or is missing. A cell's ``mean`` is the mean over
*scored* items only; a ``None`` is **not** counted as a 0. It is counted,
instead, in the denominator of ``coverage`` = scored / items. The paper's
reference code silently dropped unparsable responses, so its numbers are means
over an unknown subset; here the subset is explicit and every number carries its
coverage. (Counting ``None`` as 0 would be the other defensible choice; whoever
wants it can pass ``score=0.0``.)

Questions for which there is no row at all can only be accounted for if the
caller says how many questions a run should have had: ``total_questions`` maps
``(model, mode)`` to that number, and the difference shows up as ``absent`` in
the ``overall`` cell only (an absent question's subject and grade are unknown
here). The database path (:class:`GroupStats`) knows them and counts absent
questions in every group of their slice.

Interval
--------
Every cell with at least two scored items has a 95 % Student-t interval for the
mean, ``mean +- t(0.975, n - 1) * s / sqrt(n)`` with ``s`` the sample standard
deviation, clipped to [0, 1] (the quantile from scipy). The same interval is used in both modes: for
direct mode, where item scores are means of 0/1 marks, it is a normal
approximation with the small-sample t correction (at the benchmark's sizes the t
and normal quantiles agree to three decimals); for step-by-step scores, which
are continuous fractions, the t interval is the usual choice. Two known
weaknesses: when all scores in a cell are equal the interval has zero width, and
near 0 or 1 with few items it is too narrow (a Wilson-type interval would do
better there). With fewer than two scored items the interval is ``None``.
"""

from inference.leaderboard.core import (
    ERROR_CODES,
    ERROR_GROUPS,
    FORMAT,
    GRID_GROUPS,
    MODES,
    OVERALL,
    ROLLUP_GROUPS,
    SCORE_GROUPS,
    TYPES,
    Cell,
    Entry,
    ErrorDistribution,
    GroupStats,
    Leaderboard,
    NotCounted,
    PublishedScore,
    Replaced,
    RunInfo,
    ScoredItem,
    in_release,
    parse_group,
    tag_of,
)
from inference.leaderboard.formats import (
    DEFINITIONS,
    GROUPINGS,
    LATEX_GROUPINGS,
    TIME_RULE,
    from_csv,
    from_json,
    latex_escape,
    outside_tags,
    to_csv,
    to_document,
    to_json,
    to_latex,
)
from inference.leaderboard.published import PublishedCSVError, PublishedRow, merge_published, read_published_csv
from inference.leaderboard.statistics import (
    CI_METHOD,
    build_entry_from_stats,
    build_leaderboard,
    build_leaderboard_from_stats,
    t_quantile,
)

__all__ = [
    "CI_METHOD",
    "DEFINITIONS",
    "ERROR_CODES",
    "ERROR_GROUPS",
    "FORMAT",
    "GRID_GROUPS",
    "GROUPINGS",
    "LATEX_GROUPINGS",
    "MODES",
    "OVERALL",
    "ROLLUP_GROUPS",
    "SCORE_GROUPS",
    "TIME_RULE",
    "TYPES",
    "Cell",
    "Entry",
    "ErrorDistribution",
    "GroupStats",
    "Leaderboard",
    "NotCounted",
    "PublishedCSVError",
    "PublishedRow",
    "PublishedScore",
    "Replaced",
    "RunInfo",
    "ScoredItem",
    "build_entry_from_stats",
    "build_leaderboard",
    "build_leaderboard_from_stats",
    "from_csv",
    "from_json",
    "in_release",
    "latex_escape",
    "merge_published",
    "outside_tags",
    "parse_group",
    "read_published_csv",
    "t_quantile",
    "tag_of",
    "to_csv",
    "to_document",
    "to_json",
    "to_latex",
]
