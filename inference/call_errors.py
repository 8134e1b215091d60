"""What went wrong with one model call, in the reader's language (issue 29).

Answers and judgments keep their error as English text (``ModelCall.error``: logs, exports, scripts that
match on it). The known ones are read back here into a code and parameters and worded at display time, in
the pages and in the API's ``error_message``, so a Chinese reader never meets "truncated: the answer
reached max_tokens" or "no JSON object or list found". An error not listed here is shown as written.
This module imports no models."""

from __future__ import annotations

import re

from django.utils.translation import gettext, gettext_noop

# code: (the stored English text, its parameters as named groups; the wording in the reader's language)
KNOWN: dict[str, tuple[re.Pattern[str], str]] = {
    "truncated": (
        re.compile(r"truncated: the answer reached max_tokens"),
        gettext_noop("Cut off: the answer reached max_tokens; it is kept as far as it goes."),
    ),
    "empty_answer": (
        re.compile(r"the model returned an empty answer"),
        gettext_noop("The model returned an empty answer."),
    ),
    "no_json": (re.compile(r"no JSON object or list found"), gettext_noop("No JSON object or list was found.")),
    "unclosed_string": (
        re.compile(r"a string opened at character (?P<at>\d+) is never closed"),
        gettext_noop("The reply's string opened at character %(at)s is never closed."),
    ),
    "no_steps": (re.compile(r"the judgment lists no steps"), gettext_noop("The judgment lists no steps.")),
}


# Where the parser looked (inference.parsing.reader._snippets), said before a parse error: "in the response: ...".
_WHERE = re.compile(r"in (?P<where>the response|the <evaluation> block|the ``` block): (?P<rest>.+)", re.S)
PLACES = {
    "the response": gettext_noop("the reply"),
    "the <evaluation> block": gettext_noop("the <evaluation> block"),
    "the ``` block": gettext_noop("the ``` block"),
}


def code_of(error: str) -> tuple[str, dict[str, str]] | None:
    """The code and parameters of a stored error, or None for one not listed."""
    for code, (pattern, _wording) in KNOWN.items():
        if match := pattern.fullmatch(error.strip()):
            return code, match.groupdict()
    return None


def message(error: str) -> str:
    """The error in the active language; one not listed as written."""
    if not error:
        return error
    if place := _WHERE.fullmatch(error.strip()):
        rest = message(place["rest"])
        if rest == place["rest"]:  # nothing known after the place: shown as written
            return error
        return gettext("In %(place)s: %(error)s") % {"place": gettext(PLACES[place["where"]]), "error": rest}
    coded = code_of(error)
    if coded is None:
        return error
    code, params = coded
    return gettext(KNOWN[code][1]) % params
