"""Aligning a judge model's step split onto the gold steps.

A judge asked to label "each step" often splits a response its own way: it
merges two steps, splits one, or skips a line. Comparing position by position
would then compare different text. We align the two lists by content with a
monotonic alignment (order is kept, as in a sequence alignment): dynamic
programming over one-to-one matches that maximises the summed similarity,
then each gold step left unmatched is attached to the judge step that covers
it best between its matched neighbours (a merge). Judge steps matched to no
gold step are kept in the result and counted, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

# Below this a pair is not taken as the same step.
MIN_SIMILARITY = 0.3


def _normalise(text: str) -> str:
    return "".join(text.split()).casefold()


def _bigrams(text: str) -> Counter[str]:
    text = _normalise(text)
    if len(text) < 2:
        return Counter([text]) if text else Counter()
    return Counter(text[k : k + 2] for k in range(len(text) - 1))


def similarity(a: str, b: str) -> float:
    """How much of the shorter text the longer one contains, 0-1.

    Counted on character bigrams, so it works for Chinese without a tokenizer
    and single shared letters do not count; measured on the shorter text so
    that a judge step that merges two gold steps still matches each of them.
    """
    grams_a, grams_b = _bigrams(a), _bigrams(b)
    if not grams_a or not grams_b:
        return 1.0 if not grams_a and not grams_b else 0.0
    shared = sum((grams_a & grams_b).values())
    return shared / min(sum(grams_a.values()), sum(grams_b.values()))


@dataclass
class StepAlignment:
    gold_count: int
    judge_count: int
    # gold index -> (judge index or None, similarity, how): how is "match", "merged",
    # "positional" (same count, text too different to match) or "missing".
    gold: list[tuple[int | None, float, str]] = field(default_factory=list)
    # judge indexes no gold step was mapped to.
    unmatched_judge: list[int] = field(default_factory=list)

    @property
    def same_count(self) -> bool:
        return self.gold_count == self.judge_count

    @property
    def kind(self) -> str:
        """A summary word for reports: identical, realigned, or partial (some gold step has no judge step)."""
        if any(how == "missing" for _, _, how in self.gold):
            return "partial"
        if self.same_count and all(j == i and how == "match" for i, (j, _, how) in enumerate(self.gold)):
            return "identical"
        return "realigned"

    def labels_for_gold(self, judge_labels: Sequence[str]) -> list[str | None]:
        """The judge's label for each gold step (None where no judge step covers it)."""
        return [judge_labels[j] if j is not None else None for j, _, _ in self.gold]

    def as_pairs(self) -> list[list]:
        """JSON form stored on pem.Alignment: [gold pos, judge pos, similarity, how], 1-based, then extras."""
        pairs: list[list] = [
            [i + 1, None if j is None else j + 1, round(sim, 3), how] for i, (j, sim, how) in enumerate(self.gold)
        ]
        pairs += [[None, j + 1, 0.0, "extra"] for j in self.unmatched_judge]
        return pairs


def align(gold: Sequence[str], judge: Sequence[str]) -> StepAlignment:
    n, m = len(gold), len(judge)
    result = StepAlignment(gold_count=n, judge_count=m)
    sims = [[similarity(g, j) for j in judge] for g in gold]

    # Identical splits (the common case) skip the search.
    if n == m and all(sims[i][i] >= MIN_SIMILARITY for i in range(n)):
        result.gold = [(i, sims[i][i], "match") for i in range(n)]
        return result

    # best[i][j]: best summed similarity aligning gold[:i] with judge[:j].
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    move = [[""] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        move[i][0] = "g"
    for j in range(1, m + 1):
        move[0][j] = "j"
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            options = [(best[i - 1][j], "g"), (best[i][j - 1], "j")]
            if sims[i - 1][j - 1] >= MIN_SIMILARITY:
                options.append((best[i - 1][j - 1] + sims[i - 1][j - 1], "d"))
            # Ties prefer a match, then skipping a judge step: keeps gold steps covered.
            best[i][j], move[i][j] = max(options, key=lambda o: (o[0], o[1] == "d", o[1] == "j"))

    matched: dict[int, int] = {}
    i, j = n, m
    while i > 0 or j > 0:
        step = move[i][j]
        if step == "d":
            matched[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif step == "g":
            i -= 1
        else:
            j -= 1

    used: set[int] = set(matched.values())
    for gi in range(n):
        if gi in matched:
            ji = matched[gi]
            result.gold.append((ji, sims[gi][ji], "match"))
            continue
        # A merge: the judge step covering this gold step, between the matched neighbours.
        lower = max((matched[k] for k in matched if k < gi), default=0)
        upper = min((matched[k] for k in matched if k > gi), default=m - 1)
        window = range(lower, upper + 1) if m else range(0)
        candidates = [(sims[gi][jj], jj) for jj in window]
        sim, jj = max(candidates, default=(0.0, None))
        if jj is not None and sim >= MIN_SIMILARITY:
            result.gold.append((jj, sim, "merged"))
            used.add(jj)
        elif n == m and gi not in used and lower <= gi <= upper:
            # Same count, text rewritten beyond recognition: fall back to position, and say so.
            result.gold.append((gi, sims[gi][gi], "positional"))
            used.add(gi)
        else:
            result.gold.append((None, sim, "missing"))
    result.unmatched_judge = [jj for jj in range(m) if jj not in used]
    return result
