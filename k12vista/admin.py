from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from k12vista.models import Job, Profile


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
