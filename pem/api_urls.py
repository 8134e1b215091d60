from django.urls import path

from pem import adjudication_api, api, data_api, given_steps_api, panel_api, pipeline_api, release_api, stats_api
from pem.training import api as training_api

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
    path("splits/", pipeline_api.SplitList.as_view(), name="splits"),
    path("splits/<int:pk>/", pipeline_api.SplitDetail.as_view(), name="split"),
    path("panels/", pipeline_api.PanelList.as_view(), name="panels"),
    path("panels/<int:pk>/", pipeline_api.PanelDetail.as_view(), name="panel"),
    # PEM-800K (pem/training/api.py)
    path("training/imports/", training_api.import_file, name="training_import"),
    path("training/filter-runs/", training_api.filter_runs, name="training_filter_runs"),
    path("training/filter-runs/<int:pk>/", training_api.filter_run, name="training_filter_run"),
    path("training/exports/", training_api.training_exports, name="training_exports"),
    path("training/exports/<int:pk>/", training_api.training_export, name="training_export"),
    path("training/runs/", training_api.training_runs, name="training_runs"),
    path("training/runs/<int:pk>/", training_api.training_run, name="training_run"),
    path("training/runs/<int:pk>/endpoint/", training_api.training_run_endpoint, name="training_run_endpoint"),
]

# --- chains from runs, labels from scoring (issue 15) ---
urlpatterns += [
    path("data/from-run/", data_api.from_run, name="data_from_run"),
    path("data/from-scoring/", data_api.from_scoring, name="data_from_scoring"),
]

# --- PEBench releases (issue 13) ---
urlpatterns += [
    path("releases/", release_api.release_list, name="releases"),
    path("releases/compare/", release_api.release_compare, name="release_compare"),
    path("releases/v<int:version>/", release_api.release_detail, name="release"),
    path("releases/v<int:version>/publish/", release_api.release_publish, name="release_publish"),
]

# --- adjudication and expert scores (issue 29, pem/adjudication_api.py) ---
urlpatterns += [
    path("adjudication/", adjudication_api.adjudication_queue, name="adjudication_queue"),
    path("adjudication/<int:pk>/", adjudication_api.adjudicate, name="adjudicate"),
    path("expert/runs/<int:pk>/", adjudication_api.expert_sample, name="expert_sample"),
    path("expert/responses/<int:pk>/score/", adjudication_api.expert_score, name="expert_score"),
    path("panels/<int:pk>/restart/", panel_api.panel_restart, name="panel_restart"),
]

# --- PEBench with the given steps, as the paper measures it (issue 24) ---
urlpatterns += [
    path("pebench/given-steps/", given_steps_api.GivenSteps.as_view(), name="given_steps"),
]
