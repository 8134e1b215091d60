from django.urls import path

from pem import agreement_views, data_views, pipeline_views, release_views, views
from pem.training import views as training_views

app_name = "pem"
urlpatterns: list = [
    path("label/", views.label_queue, name="label_queue"),
    path("label/next/", views.label_next, name="label_next"),
    path("label/<int:pk>/", views.label_task, name="label_task"),
    path("adjudication/", views.adjudication_queue, name="adjudication_queue"),
    path("adjudication/<int:pk>/", views.adjudicate, name="adjudicate"),
    path("expert/", views.expert_runs, name="expert_runs"),
    path("expert/runs/<int:pk>/", views.expert_run, name="expert_run"),
    path("expert/responses/<int:pk>/score/", views.expert_score, name="expert_score"),
    path("data/", data_views.data_home, name="data_home"),
    path("data/import/", data_views.data_import, name="data_import"),
    path("data/imports/<int:pk>/", data_views.data_import_detail, name="data_import_detail"),
    path("data/chains/", data_views.data_chains, name="data_chains"),
    path("data/build/", data_views.data_build, name="data_build"),
    path("data/export/", data_views.data_export, name="data_export"),
    path("data/from-run/", data_views.data_from_run, name="data_from_run"),
    path("data/from-scoring/", data_views.data_from_scoring, name="data_from_scoring"),
    path("agreement/", agreement_views.agreement_page, name="agreement"),
    path("agreement/compute/", agreement_views.agreement_compute, name="agreement_compute"),
    path("releases/", release_views.release_list, name="pebench_releases"),
    path("releases/compare/", release_views.release_compare, name="pebench_release_compare"),
    path("releases/v<int:version>/", release_views.release_detail, name="pebench_release"),
    path("releases/v<int:version>/publish/", release_views.release_publish, name="pebench_release_publish"),
    path("releases/v<int:version>/file/", release_views.release_file, name="pebench_release_file"),
    path("splits/", pipeline_views.split_create, name="split_create"),
    path("splits/<int:pk>/", pipeline_views.split_detail, name="split"),
    path("panels/", pipeline_views.panel_create, name="panel_create"),
    path("panels/<int:pk>/", pipeline_views.panel_detail, name="panel"),
    path("panels/<int:pk>/restart/", pipeline_views.panel_restart, name="panel_restart"),
    # PEM-800K: import, filters and funnel, training exports, training (pem/training/views.py)
    path("training/", training_views.training_home, name="training_home"),
    path("training/import/", training_views.training_import, name="training_import"),
    path("training/filter/", training_views.training_filter, name="training_filter"),
    path("training/filters/<int:pk>/", training_views.training_filter_run, name="training_filter_run"),
    path("training/export/", training_views.training_export, name="training_export"),
    path("training/exports/<int:pk>/", training_views.training_export_detail, name="training_export_detail"),
    path(
        "training/exports/<int:pk>/files/<path:name>", training_views.training_export_file, name="training_export_file"
    ),  # fmt: skip
    path("training/train/", training_views.training_train, name="training_train"),
    path("training/runs/<int:pk>/", training_views.training_run, name="training_run"),
    path("training/runs/<int:pk>/endpoint/", training_views.training_register, name="training_register"),
]
