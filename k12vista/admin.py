from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from rest_framework.authtoken.models import TokenProxy

from k12vista.models import Guideline, Job, Profile

User = get_user_model()


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "display_title", "kind_label", "status", "done", "total", "started_by", "created",
                    "finished_at"]  # fmt: skip
    list_filter = ["status", "kind", "queue"]
    readonly_fields = [f.name for f in Job._meta.fields] + ["kind_label", "error_message"]

    @admin.display(description=_("Job"))
    def display_title(self, job: Job) -> str:
        return job.display_title

    @admin.display(description=_("Kind"), ordering="kind")
    def kind_label(self, job: Job) -> str:
        return job.kind_label

    @admin.display(description=_("Error"))
    def error_message(self, job: Job) -> str:
        return job.error_message


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "invited_by", "created"]


# --- accounts ---------------------------------------------------------------------------------
# The admin role is staff with change_user, which Django's own UserAdmin would let make anyone
# (itself included) a superuser or give them any permission, and then read every API token.
# Only a superuser grants superuser or permissions, or edits a superuser's account; tokens are
# not administered here at all (a person makes their own on the account page; a password
# change or a disabled account revokes it, k12vista.services.revoke_api_tokens).


class StudioUserAdmin(UserAdmin):
    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if request.user.is_superuser:
            return fieldsets
        hidden = {"is_superuser", "user_permissions"}
        return [(title, {**options, "fields": [f for f in options["fields"] if f not in hidden]})
                for title, options in fieldsets]  # fmt: skip

    def _touches_a_superuser(self, request: HttpRequest, obj: Any) -> bool:
        return obj is not None and obj.is_superuser and not request.user.is_superuser

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and not self._touches_a_superuser(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and not self._touches_a_superuser(request, obj)


admin.site.unregister(User)
admin.site.register(User, StudioUserAdmin)
if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(Guideline)
class GuidelineAdmin(admin.ModelAdmin):
    """Read-only here: an edit is a new version, written on the studio's Guidelines page
    (k12vista.guidelines.publish), so no label ever points at text that changed under it."""

    list_display = ["kind", "version", "updated_by", "created"]
    list_filter = ["kind"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
