from django.urls import path

from review import plan_api

app_name = "review_api"
urlpatterns: list = [
    path("audit-plan/", plan_api.audit_plan, name="audit_plan"),
]
