from django.urls import path

from review import api, plan_api

app_name = "review_api"
urlpatterns: list = [
    path("audit-plan/", plan_api.audit_plan, name="audit_plan"),
    path("audits/", api.AuditList.as_view(), name="audits"),
    path("audits/<int:pk>/", api.AuditDetail.as_view(), name="audit"),
    path("audits/<int:pk>/report/", api.audit_report, name="audit_report"),
    path("audits/<int:pk>/decide/", api.audit_decide, name="audit_decide"),
    path("items/<int:item_pk>/rating/", api.submit_rating, name="rating"),
]
