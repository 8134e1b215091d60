from django import forms
from django.utils.translation import gettext_lazy as _

from k12vista.vocabulary import QuestionType, Stage, Subject
from pem.labelling import ITEM_FILTERS


class ItemChoiceForm(forms.Form):
    """What a person narrows the labelling or adjudication queue to; every field may stay open."""

    subject = forms.ChoiceField(choices=[("", _("Any subject")), *Subject.choices], required=False, label=_("Subject"))
    stage = forms.ChoiceField(choices=[("", _("Any stage")), *Stage.choices], required=False, label=_("Stage"))
    qtype = forms.ChoiceField(choices=[("", _("Any type")), *QuestionType.choices], required=False, label=_("Type"))

    def choices(self) -> dict:
        """The valid choices as plain values (kept in the session, or in the query, between items)."""
        if not self.is_valid():
            return {}
        return {name: self.cleaned_data[name] for name in ITEM_FILTERS if self.cleaned_data[name]}
