from django.urls import path

from annotation import views

app_name = "annotation"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("claim/", views.claim, name="claim"),
    path("review/<int:pk>/", views.review, name="review"),
    path("steps/<int:pk>/", views.steps, name="steps"),
    path("work/<int:pk>/reject/", views.reject, name="reject"),
    path("team/", views.team, name="team"),
    path("assignments/<int:pk>/reassign/", views.reassign, name="reassign"),
    path("questions/", views.question_list, name="questions"),
    path("questions/<str:hash_id>/", views.question_detail, name="question_detail"),
]
