from django.urls import path

from review import api, decision_api, items_api, plan_api

app_name = "review_api"
urlpatterns: list = [
    path("audit-plan/", plan_api.audit_plan, name="audit_plan"),
    path("audits/", api.AuditList.as_view(), name="audits"),
    path("audits/<int:pk>/", api.AuditDetail.as_view(), name="audit"),
    path("audits/<int:pk>/report/", api.audit_report, name="audit_report"),
    path("audits/<int:pk>/decide/", decision_api.audit_decide, name="audit_decide"),
    path("audits/<int:pk>/close/", decision_api.audit_close, name="audit_close"),
    path("items/<int:item_pk>/rating/", api.submit_rating, name="rating"),
    # An inspector's own items, rework and re-audit (issue 29)
    path("my-items/", items_api.MyItems.as_view(), name="my_items"),
    path("items/<int:pk>/rework/", items_api.item_rework, name="item_rework"),
    path("items/<int:pk>/reaudit/", items_api.item_reaudit, name="item_reaudit"),
    path("lots/<int:pk>/reaudit/", items_api.lot_reaudit, name="lot_reaudit"),
]
