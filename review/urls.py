from django.urls import path

from review import views

app_name = "review"
urlpatterns = [
    path("", views.home, name="home"),
    path("audits/new/", views.audit_create, name="audit_create"),
    path("audits/new/job/<int:job_pk>/", views.audit_creating, name="audit_creating"),
    path("audits/<int:pk>/", views.audit_detail, name="audit"),
    path("audits/<int:pk>/next/", views.next_item, name="next"),
    path("audits/<int:pk>/close/", views.audit_close, name="audit_close"),
    path("audits/<int:pk>/decide/", views.audit_decide, name="audit_decide"),
    path("lots/<int:pk>/reaudit/", views.lot_reaudit, name="lot_reaudit"),
    path("audits/<int:pk>/report/", views.report, name="report"),
    path("audits/<int:pk>/report.<str:fmt>", views.report_export, name="report_export"),
    path("items/<int:item_pk>/rate/", views.rate, name="rate"),
    path("items/<int:pk>/", views.item_detail, name="item"),
    path("items/<int:pk>/reaudit/", views.reaudit, name="reaudit"),
]
