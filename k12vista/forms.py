from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.forms.fields import InvalidJSONInput, JSONString
from django.utils.translation import gettext_lazy as _

from k12vista.models import Guideline
from k12vista.roles import Role
from k12vista.text import BadLine, parse_record_line


class StorableJSONField(forms.JSONField):
    """A form's JSON text read as the importers read a line (k12vista.text.parse_record_line):
    nesting too deep for Python's parser (a RecursionError, a 500, in Django's JSONField), a NUL,
    an unpaired surrogate or a number that is not finite is a field error naming why."""

    def to_python(self, value):
        if self.disabled or value in self.empty_values or not isinstance(value, str):
            return super().to_python(value)
        try:
            converted = parse_record_line(value.encode("utf-8", "surrogatepass"))
        except BadLine as exc:
            raise forms.ValidationError(str(exc), code="invalid") from None
        return JSONString(converted) if isinstance(converted, str) else converted

    def bound_data(self, data, initial):
        # The form shown again with its error: a refused text is shown as it was typed (parsed
        # and written back, a lone surrogate would break the page).
        if self.disabled or not isinstance(data, str):
            return super().bound_data(data, initial)
        try:
            return parse_record_line(data.encode("utf-8", "surrogatepass"))
        except BadLine:
            return InvalidJSONInput(data)


class UserCreateForm(forms.Form):
    username = forms.RegexField(
        regex=r"^[\w.@+-]+\Z",
        max_length=150,
        label=_("Username"),
        error_messages={"invalid": _("Use letters, digits and @ . + - _ only.")},
    )
    email = forms.EmailField(required=False, label=_("Email"))
    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple, label=_("Roles"))
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput,
        label=_("Password"),
        help_text=_("Leave empty to create an invitation link instead."),
    )

    def clean_username(self):
        username = self.cleaned_data["username"]
        if get_user_model().objects.filter(username__iexact=username).exists():
            raise forms.ValidationError(_("This username is taken."))
        return username

    def clean(self):
        cleaned = super().clean()
        password = cleaned.get("password")
        if password:
            user = get_user_model()(username=cleaned.get("username", ""), email=cleaned.get("email", ""))
            try:
                validate_password(password, user)
            except forms.ValidationError as exc:
                self.add_error("password", exc)
        return cleaned


class UserRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=Role.choices, widget=forms.CheckboxSelectMultiple, required=False, label=_("Roles")
    )
    is_active = forms.BooleanField(required=False, label=_("Active"))


class GuidelineForm(forms.Form):
    kind = forms.ChoiceField(choices=Guideline.Kind.choices)
    text = forms.CharField(label=_("Guideline text"), max_length=20000, widget=forms.Textarea(attrs={"rows": 12}))
