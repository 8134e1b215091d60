from django.urls import path

from annotation import benchmark_views as benchmark
from annotation import correction_views as correction
from annotation import segmentation_views as segmentation
from annotation import views

app_name = "annotation"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("claim/", views.claim, name="claim"),
    path("review/<int:pk>/", views.review, name="review"),
    path("review/<int:pk>/figures/<int:figure_pk>/crop/", views.recrop, name="recrop"),
    path("review/<int:pk>/split/", views.split, name="split"),
    path("review/<int:pk>/merge-next/", views.merge_next, name="merge_next"),
    path("review/<int:pk>/merge/<int:other_pk>/", views.merge_into, name="merge_into"),
    path("steps/<int:pk>/", views.steps, name="steps"),
    path("work/<int:pk>/reject/", views.reject, name="reject"),
    path("work/<int:pk>/heartbeat/", views.heartbeat, name="heartbeat"),
    path("team/", views.team, name="team"),
    path("imports/", views.imports, name="imports"),
    path("imports/<int:pk>/", views.import_detail, name="import_detail"),
    path("imports/<int:pk>/retry/", views.import_retry, name="import_retry"),
    path("imports/<int:pk>/segmentation/", segmentation.screen, name="segmentation"),
    path("imports/<int:pk>/segmentation/repair/", segmentation.repair, name="segmentation_repair"),
    path("assignments/<int:pk>/reassign/", views.reassign, name="reassign"),
    path("questions/", views.question_list, name="questions"),
    path("questions/export/", views.export, name="export"),
    path("questions/<str:hash_id>/", views.question_detail, name="question_detail"),
    path("questions/<str:hash_id>/corrections/", correction.open_correction, name="correction_open"),
    path("corrections/", correction.correction_list, name="corrections"),
    path("corrections/<int:pk>/", correction.correction_detail, name="correction"),
    path("corrections/<int:pk>/fix/", correction.correction_fix, name="correction_fix"),
    path("corrections/<int:pk>/check/", correction.correction_check, name="correction_check"),
    path("benchmark/", benchmark.home, name="benchmark"),
    path("benchmark/draws/", benchmark.draw_create, name="draw_create"),
    path("benchmark/draws/<int:pk>/", benchmark.candidate_set, name="candidate_set"),
    path("benchmark/draws/<int:pk>/release/", benchmark.release_create, name="release_create"),
    path("benchmark/releases/compare/", benchmark.release_compare, name="release_compare"),
    path("benchmark/releases/v<int:version>/", benchmark.release_detail, name="release"),
    path("benchmark/releases/v<int:version>/publish/", benchmark.release_publish, name="release_publish"),
    path("benchmark/releases/v<int:version>/files/<str:form>/", benchmark.release_file, name="release_file"),
    path(
        "benchmark/releases/v<int:version>/corrections.json", correction.release_corrections, name="release_corrections"
    ),  # fmt: skip
    path("benchmark/units/", benchmark.units, name="units"),
    path("benchmark/units/cluster/", benchmark.cluster, name="cluster"),
    path("benchmark/units/<int:pk>/", benchmark.unit_action, name="unit_action"),
]
