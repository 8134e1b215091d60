from django.urls import path

from annotation import api, benchmark_api, correction_api, import_api, work_api

app_name = "annotation_api"
urlpatterns = [
    path("questions/", api.QuestionList.as_view(), name="questions"),
    path("questions/<str:hash_id>/", api.QuestionDetail.as_view(), name="question"),
    path("benchmark/allocation/", benchmark_api.allocation, name="allocation"),
    path("benchmark/draws/", benchmark_api.CandidateSetList.as_view(), name="draws"),
    path("benchmark/draws/<int:pk>/", benchmark_api.CandidateSetDetail.as_view(), name="draw"),
    path("benchmark/draws/<int:pk>/questions/", benchmark_api.CandidateSetQuestions.as_view(), name="draw_questions"),
    path("benchmark/draws/<int:pk>/release/", benchmark_api.release_create, name="release_create"),
    path("benchmark/releases/", benchmark_api.ReleaseList.as_view(), name="releases"),
    path("benchmark/releases/compare/", benchmark_api.release_compare, name="release_compare"),
    path("benchmark/releases/v<int:version>/", benchmark_api.ReleaseDetail.as_view(), name="release"),
    path("benchmark/releases/v<int:version>/items/", benchmark_api.ReleaseItems.as_view(), name="release_items"),
    path("benchmark/releases/v<int:version>/publish/", benchmark_api.release_publish, name="release_publish"),
    path("benchmark/clustering/", benchmark_api.cluster, name="cluster"),
    path(
        "benchmark/releases/v<int:version>/corrections/",
        correction_api.ReleaseCorrections.as_view(),
        name="release_corrections",
    ),  # fmt: skip
    path("corrections/", correction_api.CorrectionList.as_view(), name="corrections"),
    path("corrections/<int:pk>/", correction_api.CorrectionDetail.as_view(), name="correction"),
    path("corrections/<int:pk>/fix/", correction_api.CorrectionFix.as_view(), name="correction_fix"),
    path("corrections/<int:pk>/check/", correction_api.CorrectionCheck.as_view(), name="correction_check"),
    # Imports (issue 29): exam PDFs and question files, as the imports page
    path("imports/pdf/", import_api.pdf_import, name="pdf_import"),
    path("imports/questions/", import_api.question_import, name="question_import"),
    path("imports/<int:pk>/", import_api.import_detail, name="import"),
    path("imports/<int:pk>/retry/", import_api.import_retry, name="import_retry"),
    # The annotator's work (issue 29): claim, read, save, accept, reject, as the queue's pages
    path("work/", work_api.WorkList.as_view(), name="work"),
    path("work/claim/", work_api.WorkClaim.as_view(), name="work_claim"),
    path("work/<int:pk>/", work_api.WorkDetail.as_view(), name="work_item"),
    path("work/<int:pk>/save/", work_api.WorkSave.as_view(), name="work_save"),
    path("work/<int:pk>/accept/", work_api.WorkAccept.as_view(), name="work_accept"),
    path("work/<int:pk>/reject/", work_api.WorkReject.as_view(), name="work_reject"),
]
