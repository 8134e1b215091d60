"""Prompts laid out for prefix caching: the fixed instructions first, the item's own parts (subject,
question, figure) after, so the requests of a run share a long prefix (bench/prefix_share.py)."""

import pytest

from bench import prefix_share
from inference import client, default_prompts


def test_the_share_counts_the_longest_prefix_with_any_earlier_request():
    # "abcX" shares "abc" with "abcd", not only "ab" with the one just before it.
    assert prefix_share.prefix_share(["abcd", "abzz", "abcX"]) == pytest.approx((0 + 2 + 3) / 12)


@pytest.mark.parametrize("kind", list(prefix_share.KINDS))
def test_a_runs_requests_share_most_of_their_text(kind):
    share = prefix_share.prefix_share(prefix_share.run_requests(kind, questions=120, seed=3))
    # Before the prompts put the subject and the figure after the instructions: 5 to 26 per cent.
    assert share > 0.5, f"{kind}: {share:.1%}"


def test_the_figure_comes_after_the_text():
    system, user = default_prompts.render(
        default_prompts.default_prompt("answer_direct", "free_response"), question="求 $x$。", options="",
        subject="数学", grade="8", caption="",
    )  # fmt: skip
    parts = client.build_messages(system=system, user=user, image_urls=["data:image/jpeg;base64,AA"])[-1]["content"]
    assert [part["type"] for part in parts] == ["text", "image_url"]
    assert parts[0]["text"].startswith("【作答要求】") and parts[0]["text"].rstrip().endswith("求 $x$。")
