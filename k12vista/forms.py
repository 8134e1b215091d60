from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.utils.translation import gettext_lazy as _

from k12vista.roles import Role


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
