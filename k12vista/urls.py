from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.i18n import set_language
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from k12vista import api, views

studio_patterns = [
    path("labels/", views.taxonomy, name="taxonomy"),
    path("preview/", views.formula_preview, name="preview"),
    path("account/", views.account, name="account"),
    path("account/token/", views.rotate_token, name="rotate_token"),
    path("csrf/", views.csrf_token, name="csrf_token"),
    path("jobs/", views.job_list, name="job_list"),
    path("metrics", views.metrics, name="metrics"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="job_cancel"),
    path("manage/users/", views.users, name="users"),
    path("manage/users/<int:pk>/", views.user_edit, name="user_edit"),
    path("manage/users/<int:pk>/invite/", views.user_invite, name="user_invite"),
    path("manage/settings/", views.studio_settings, name="settings"),
    path("manage/guidelines/", views.guideline_list, name="guidelines"),
]

api_patterns = [
    path("me/", api.me, name="api_me"),
    path("jobs/", api.JobList.as_view(), name="api_jobs"),
    path("jobs/<int:pk>/", api.JobDetail.as_view(), name="api_job"),
    path("jobs/<int:pk>/cancel/", api.job_cancel, name="api_job_cancel"),
    path("guidelines/", api.guideline_list, name="api_guidelines"),
    path("guidelines/<str:kind>/", api.GuidelineDetail.as_view(), name="api_guideline"),
    path("team/progress/", api.team_progress, name="api_team_progress"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("", include((studio_patterns, "k12vista"))),
    path("annotate/", include("annotation.urls")),
    path("research/", include("inference.urls")),
    path("pem/", include("pem.urls")),
    path("inspect/", include("review.urls")),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "password/set/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(template_name="registration/password_set.html"),
        name="password_set",
    ),
    path(
        "password/set/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="registration/password_set_done.html"),
        name="password_reset_complete",
    ),
    path("password/change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("password/change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("i18n/setlang/", set_language, name="set_language"),
    path("api/", include((api_patterns, "api"))),
    path("api/", include("annotation.api_urls")),
    path("api/", include("inference.api_urls")),
    path("api/pem/", include("pem.api_urls")),
    path("api/inspect/", include("review.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api_docs"),
    path("admin/", admin.site.urls),
    path("media/<path:path>", views.media, name="media"),
]
