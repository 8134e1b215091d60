from django.urls import path

from pem import api, data_api, stats_api

app_name = "pem_api"
urlpatterns: list = [
    path("tasks/", api.task_list, name="tasks"),
    path("tasks/next/", api.task_next, name="task_next"),
    path("tasks/<int:pk>/", api.task_detail, name="task"),
    path("tasks/<int:pk>/draft/", api.task_draft, name="task_draft"),
    path("tasks/<int:pk>/submit/", api.task_submit, name="task_submit"),
    path("items/<int:pk>/labels/", api.item_labels, name="item_labels"),
    path("agreement/", stats_api.AgreementFromFile.as_view(), name="agreement"),
    path("data/imports/", data_api.import_file, name="data_import"),
    path("data/exports/", data_api.export, name="data_export"),
    path("data/builds/", data_api.build, name="data_build"),
]

# --- chains from runs, labels from scoring (issue 15) ---
urlpatterns += [
    path("data/from-run/", data_api.from_run, name="data_from_run"),
    path("data/from-scoring/", data_api.from_scoring, name="data_from_scoring"),
]
