import pytest

from inference import standings
from inference.models import PublishedResult


@pytest.mark.django_db
def test_it_shows_the_newest_published_number_when_sources_disagree():
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.51, source="paper v1")
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.53, source="paper v2")
    board = standings.standings([])
    published = board.entry("GPT-4o", "direct").published["overall"]
    assert (published.score, published.source) == (0.53, "paper v2")
