"""The acceptance sampling plan lookup: ISO 2859-1 / ANSI/ASQ Z1.4 single sampling,
normal inspection, general inspection level II; its command and its API endpoint.

Where the expected values come from: "Table I" is the standard's table of sample size
code letters (column II); "II-A X/c" is Table II-A (ISO 2859-1 Table 2-A), row of code
letter X, AQL column c, read off the printed table; an arrow cell names the cell it
points to. Every cell of Table II-A, arrows resolved, was also cross-checked once
against the independent transcription in the R package AQLSchemes (J. Lawson,
function AASingle / AAZ14Single, normal inspection): all 416 cells agree.
"""

import io
import json

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from review.sampling import (
    AQL_HEADINGS,
    AQL_VALUES,
    CODE_LETTERS,
    SAMPLE_SIZES,
    SamplingPlan,
    decide,
    single_sampling_plan,
)

# One lot size per Table I range (general level II), lower and upper ends.
TABLE_I = [
    (2, "A"), (8, "A"), (9, "B"), (15, "B"), (16, "C"), (25, "C"), (26, "D"), (50, "D"),
    (51, "E"), (90, "E"), (91, "F"), (150, "F"), (151, "G"), (280, "G"), (281, "H"), (500, "H"),
    (501, "J"), (1200, "J"), (1201, "K"), (3200, "K"), (3201, "L"), (10000, "L"), (10001, "M"),
    (35000, "M"), (35001, "N"), (150000, "N"), (150001, "P"), (500000, "P"), (500001, "Q"), (10**8, "Q"),
]  # fmt: skip


@pytest.mark.parametrize(("lot_size", "letter"), TABLE_I)
def test_it_picks_the_code_letter_of_table_i(lot_size, letter):
    plan = single_sampling_plan(lot_size, 1.0)
    assert plan.code_letter == letter


def test_it_has_the_columns_and_sample_sizes_of_table_ii_a():
    assert AQL_VALUES == (
        0.010, 0.015, 0.025, 0.040, 0.065, 0.10, 0.15, 0.25, 0.40, 0.65, 1.0, 1.5, 2.5,
        4.0, 6.5, 10, 15, 25, 40, 65, 100, 150, 250, 400, 650, 1000,
    )  # fmt: skip
    assert SAMPLE_SIZES == {
        "A": 2, "B": 3, "C": 5, "D": 8, "E": 13, "F": 20, "G": 32, "H": 50,
        "J": 80, "K": 125, "L": 200, "M": 315, "N": 500, "P": 800, "Q": 1250, "R": 2000,
    }  # fmt: skip


# Cells that hold a plan: (lot size, AQL, code letter, n, Ac, Re).
PLAIN_CELLS = [
    (1000, 1.0, "J", 80, 2, 3),  # II-A J/1.0
    (1000, 0.15, "J", 80, 0, 1),  # II-A J/0.15
    (1000, 0.65, "J", 80, 1, 2),  # II-A J/0.65
    (1000, 1.5, "J", 80, 3, 4),  # II-A J/1.5
    (1000, 2.5, "J", 80, 5, 6),  # II-A J/2.5
    (1000, 4.0, "J", 80, 7, 8),  # II-A J/4.0
    (1000, 6.5, "J", 80, 10, 11),  # II-A J/6.5
    (1000, 10, "J", 80, 14, 15),  # II-A J/10
    (1000, 15, "J", 80, 21, 22),  # II-A J/15, the last plan in row J
    (3, 6.5, "A", 2, 0, 1),  # II-A A/6.5
    (3, 25, "A", 2, 1, 2),  # II-A A/25
    (3, 1000, "A", 2, 30, 31),  # II-A A/1000
    (10, 4.0, "B", 3, 0, 1),  # II-A B/4.0
    (10, 1000, "B", 3, 44, 45),  # II-A B/1000
    (20, 650, "C", 5, 44, 45),  # II-A C/650
    (40, 400, "D", 8, 44, 45),  # II-A D/400
    (60, 250, "E", 13, 44, 45),  # II-A E/250
    (60, 150, "E", 13, 30, 31),  # II-A E/150
    (60, 1.0, "E", 13, 0, 1),  # II-A E/1.0
    (100, 0.65, "F", 20, 0, 1),  # II-A F/0.65
    (100, 65, "F", 20, 21, 22),  # II-A F/65
    (200, 0.40, "G", 32, 0, 1),  # II-A G/0.40
    (200, 40, "G", 32, 21, 22),  # II-A G/40
    (400, 0.25, "H", 50, 0, 1),  # II-A H/0.25
    (2000, 0.10, "K", 125, 0, 1),  # II-A K/0.10
    (2000, 1.0, "K", 125, 3, 4),  # II-A K/1.0
    (5000, 0.065, "L", 200, 0, 1),  # II-A L/0.065
    (5000, 6.5, "L", 200, 21, 22),  # II-A L/6.5
    (20000, 0.040, "M", 315, 0, 1),  # II-A M/0.040
    (100000, 0.025, "N", 500, 0, 1),  # II-A N/0.025
    (100000, 1.0, "N", 500, 10, 11),  # II-A N/1.0
    (200000, 0.015, "P", 800, 0, 1),  # II-A P/0.015
    (600000, 0.010, "Q", 1250, 0, 1),  # II-A Q/0.010
    (600000, 1.0, "Q", 1250, 21, 22),  # II-A Q/1.0
]


@pytest.mark.parametrize(("lot_size", "aql", "letter", "n", "ac", "re"), PLAIN_CELLS)
def test_it_reads_the_plan_in_the_lots_own_row(lot_size, aql, letter, n, ac, re):
    plan = single_sampling_plan(lot_size, aql)
    assert (plan.code_letter, plan.plan_letter) == (letter, letter)
    assert (plan.sample_size, plan.accept, plan.reject) == (n, ac, re)
    assert plan.arrow is None
    assert plan.note == f"code letter {letter}, AQL {AQL_HEADINGS[AQL_VALUES.index(aql)]}: n={n}, Ac {ac}, Re {re}"


# Arrow cells: (lot size, AQL, code letter, arrow, letter of the plan used, n, Ac, Re).
ARROW_CELLS = [
    # Down: "use the first sampling plan below the arrow".
    (1000, 0.065, "J", "down", "L", 200, 0, 1),  # II-A J/0.065 and K/0.065 are arrows; L/0.065 is 0 1
    (1000, 0.40, "J", "down", "K", 125, 1, 2),  # II-A J/0.40 (the arrow right of the up arrow) -> K/0.40
    (1000, 0.010, "J", "down", "Q", 1250, 0, 1),  # II-A J/0.010 -> Q/0.010, the only plan in that column
    (100, 1.5, "F", "down", "G", 32, 1, 2),  # II-A F/1.5 -> G/1.5
    (100000, 0.065, "N", "down", "P", 800, 1, 2),  # II-A N/0.065 -> P/0.065
    (600000, 0.025, "Q", "down", "R", 2000, 1, 2),  # II-A Q/0.025 -> R/0.025: row R is only reached by arrows
    (3, 10, "A", "down", "C", 5, 1, 2),  # II-A A/10 and B/10 are arrows -> C/10
    (3, 15, "A", "down", "B", 3, 1, 2),  # II-A A/15 -> B/15
    (5, 0.65, "A", "down", "F", 20, 0, 1),  # II-A A/0.65 -> F/0.65
    # Up: "use the first sampling plan above the arrow".
    (1000, 0.25, "J", "up", "H", 50, 0, 1),  # II-A J/0.25 -> H/0.25
    (1000, 25, "J", "up", "H", 50, 21, 22),  # II-A J/25 -> H/25
    (1000, 100, "J", "up", "E", 13, 21, 22),  # II-A J/100 ... F/100 are arrows -> E/100
    (1000, 1000, "J", "up", "B", 3, 44, 45),  # II-A J/1000 ... C/1000 are arrows -> B/1000
    (100, 1.0, "F", "up", "E", 13, 0, 1),  # II-A F/1.0 -> E/1.0
    (5000, 10, "L", "up", "K", 125, 21, 22),  # II-A L/10 -> K/10
    (20, 1000, "C", "up", "B", 3, 44, 45),  # II-A C/1000 -> B/1000
    (10, 6.5, "B", "up", "A", 2, 0, 1),  # II-A B/6.5 -> A/6.5
    (600000, 0.015, "Q", "up", "P", 800, 0, 1),  # II-A Q/0.015 -> P/0.015
]


@pytest.mark.parametrize(("lot_size", "aql", "letter", "arrow", "plan_letter", "n", "ac", "re"), ARROW_CELLS)
def test_it_follows_the_arrow_to_the_first_plan_in_the_column(lot_size, aql, letter, arrow, plan_letter, n, ac, re):
    plan = single_sampling_plan(lot_size, aql)
    assert (plan.code_letter, plan.arrow, plan.plan_letter) == (letter, arrow, plan_letter)
    assert (plan.sample_size, plan.accept, plan.reject) == (n, ac, re)
    where = "below" if arrow == "down" else "above"
    assert f"arrow: use the first plan {where} (code letter {plan_letter}, n={n}" in plan.note


def test_every_lookup_lands_on_a_plan():
    """Every code letter that Table I gives (A-Q) with every AQL column: the arrows
    always end on a plan in the arrow's direction, and single sampling has Re = Ac + 1."""
    lot_sizes = {letter: lot_size for lot_size, letter in TABLE_I}
    for letter, lot_size in lot_sizes.items():
        for aql in AQL_VALUES:
            plan = single_sampling_plan(lot_size, aql)
            assert plan.code_letter == letter
            assert plan.reject == plan.accept + 1
            assert plan.sample_size == SAMPLE_SIZES[plan.plan_letter]
            moved = CODE_LETTERS.index(plan.plan_letter) - CODE_LETTERS.index(letter)
            assert {None: moved == 0, "down": moved > 0, "up": moved < 0}[plan.arrow], (letter, aql)


def test_it_says_to_inspect_the_whole_lot_when_the_sample_is_as_large_as_the_lot():
    # II-A A/0.65 points down to F: n=20 for a lot of 5.
    plan = single_sampling_plan(5, 0.65)
    assert plan.whole_lot and plan.sample_size == 20 and plan.units_to_inspect == 5
    assert "inspect the whole lot (100%)" in plan.note
    assert plan.as_dict()["whole_lot"] is True
    # II-A A/6.5: n=2 equals a lot of 2 (whole lot) but not a lot of 3.
    assert single_sampling_plan(2, 6.5).whole_lot
    three = single_sampling_plan(3, 6.5)
    assert not three.whole_lot and three.units_to_inspect == 2 and "100%" not in three.note


@pytest.mark.parametrize("lot_size", [1, 0, -5])
def test_it_refuses_a_lot_smaller_than_table_i(lot_size, english):
    with pytest.raises(ValueError, match="at least 2"):
        single_sampling_plan(lot_size, 1.0)


@pytest.mark.parametrize("lot_size", ["1000", 10.5, True, None])
def test_it_refuses_a_lot_size_that_is_not_a_whole_number(lot_size, english):
    with pytest.raises(ValueError, match="whole number"):
        single_sampling_plan(lot_size, 1.0)


@pytest.mark.parametrize("aql", [0.5, 3.0, 0.0, -1.0, 2000.0, float("nan")])
def test_it_refuses_an_aql_that_is_not_a_column(aql, english):
    with pytest.raises(ValueError, match="not a column of Table II-A; use one of 0.010, 0.015"):
        single_sampling_plan(1000, aql)


def test_it_accepts_an_integer_aql_for_a_whole_number_column():
    assert single_sampling_plan(1000, 10) == single_sampling_plan(1000, 10.0)
    assert single_sampling_plan(1000, 1).accept == 2


def test_it_decides_by_the_accept_and_reject_numbers():
    plan = single_sampling_plan(1000, 1.0)  # II-A J/1.0: n=80, Ac 2, Re 3
    assert [decide(plan, d) for d in (0, 1, 2, 3, 4, 80)] == ["accept"] * 3 + ["reject"] * 3
    zero = single_sampling_plan(1000, 0.15)  # II-A J/0.15: Ac 0, Re 1
    assert (decide(zero, 0), decide(zero, 1)) == ("accept", "reject")


@pytest.mark.parametrize("defects", [-1, 81, 2.0, "2"])
def test_it_refuses_a_defect_count_the_sample_cannot_have(defects, english):
    with pytest.raises(ValueError, match="defects"):
        decide(single_sampling_plan(1000, 1.0), defects)


def test_it_counts_defects_against_the_items_actually_inspected(english):
    whole = single_sampling_plan(5, 0.65)  # n=20 for a lot of 5: only 5 items exist
    assert decide(whole, 1) == "reject"
    with pytest.raises(ValueError, match="5 inspected items"):
        decide(whole, 6)


def test_the_plan_is_immutable():
    plan = single_sampling_plan(1000, 1.0)
    assert isinstance(plan, SamplingPlan)
    with pytest.raises(AttributeError):
        plan.accept = 5  # type: ignore[misc]


# --- manage.py audit_plan -----------------------------------------------------------------


def run_command(*args: str) -> dict:
    out = io.StringIO()
    call_command("audit_plan", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_prints_the_plan_as_json():
    document = run_command("--lot-size", "1000", "--aql", "0.065")
    assert document == {
        "lot_size": 1000,
        "aql": 0.065,
        "code_letter": "J",
        "plan_letter": "L",  # II-A J/0.065 -> L/0.065
        "sample_size": 200,
        "accept": 0,
        "reject": 1,
        "arrow": "down",
        "note": "code letter J, AQL 0.065: arrow: use the first plan below (code letter L, n=200, Ac 0, Re 1)",
        "whole_lot": False,
        "units_to_inspect": 200,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lot-size", "1", "--aql", "1.0"], "at least 2"),
        (["--lot-size", "1000", "--aql", "0.5"], "not a column of Table II-A"),
    ],
)
def test_the_command_explains_bad_input(args, message, english):
    with pytest.raises(CommandError, match=message):
        run_command(*args)


# --- GET /api/inspect/audit-plan/ ---------------------------------------------------------

URL = reverse("review_api:audit_plan")


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def test_the_endpoint_lives_under_the_review_api():
    assert URL == "/api/inspect/audit-plan/"


def test_inspectors_researchers_and_admins_get_the_plan(inspector, researcher, administrator):
    expected = run_command("--lot-size", "5", "--aql", "0.65")
    for person in (inspector, researcher, administrator):
        response = client_for(person).get(URL, {"lot_size": "5", "aql": "0.65"})
        assert response.status_code == 200, person
        assert response.json() == expected
    assert expected["whole_lot"] is True and expected["plan_letter"] == "F"  # II-A A/0.65 -> F/0.65, n=20


def test_others_are_kept_out(annotator, no_role_user):
    query = {"lot_size": "1000", "aql": "1.0"}
    assert client_for(None).get(URL, query).status_code == 401
    assert client_for(annotator).get(URL, query).status_code == 403
    assert client_for(no_role_user).get(URL, query).status_code == 403


def test_it_only_answers_get(inspector):
    assert client_for(inspector).post(URL, {"lot_size": "1000", "aql": "1.0"}).status_code == 405


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"aql": "1.0"}, "lot_size", "required"),
        ({"lot_size": "1000"}, "aql", "required"),
        ({"lot_size": "many", "aql": "1.0"}, "lot_size", "valid integer"),
        ({"lot_size": "1000", "aql": "low"}, "aql", "valid number"),
        ({"lot_size": "1", "aql": "1.0"}, "lot_size", "at least 2"),
        ({"lot_size": "1000", "aql": "0.5"}, "aql", "not a column of Table II-A"),
    ],
)
def test_bad_parameters_get_400_with_a_message(inspector, query, field, message):
    client = client_for(inspector)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"  # DRF's own messages follow the language
    response = client.get(URL, query)
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field]
    assert message in errors[field][0]
