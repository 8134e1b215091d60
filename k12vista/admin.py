from django.contrib import admin

from k12vista.models import Job, Profile


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "done", "total", "started_by", "created", "finished_at"]
    list_filter = ["status", "kind", "queue"]
    readonly_fields = [f.name for f in Job._meta.fields]


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ["user", "invited_by", "created"]
