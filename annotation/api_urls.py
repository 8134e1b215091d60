from django.urls import path

from annotation import api

app_name = "annotation_api"
urlpatterns = [
    path("questions/", api.QuestionList.as_view(), name="questions"),
    path("questions/<str:hash_id>/", api.QuestionDetail.as_view(), name="question"),
]
