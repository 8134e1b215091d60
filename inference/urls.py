from django.urls import path

from inference import campaign_views, leaderboard_views, reference_views, views

app_name = "inference"
urlpatterns = [
    path("", views.home, name="home"),
    path("endpoints/", views.endpoint_list, name="endpoints"),
    path("endpoints/new/", views.endpoint_create, name="endpoint_create"),
    path("endpoints/<int:pk>/", views.endpoint_edit, name="endpoint_edit"),
    path("endpoints/<int:pk>/deactivate/", views.endpoint_deactivate, name="endpoint_deactivate"),
    path("endpoints/<int:pk>/test/", views.endpoint_test, name="endpoint_test"),
    path("prompts/", views.prompt_list, name="prompts"),
    path("prompts/reference/", views.reference_prompts_register, name="reference_prompts"),
    path("prompts/<slug:kind>/<slug:qtype>/", views.prompt_detail, name="prompt"),
    path("prompts/<slug:kind>/<slug:qtype>/diff/", views.prompt_diff, name="prompt_diff"),
    path("runs/", views.run_list, name="runs"),
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/retry/", views.run_retry, name="run_retry"),
    path("runs/<int:pk>/score/", views.run_score, name="run_score"),
    path("campaigns/", campaign_views.campaign_list, name="campaigns"),
    path("campaigns/new/", campaign_views.campaign_create, name="campaign_create"),
    path("campaigns/<int:pk>/", campaign_views.campaign_detail, name="campaign"),
    path("campaigns/<int:pk>/retry/", campaign_views.campaign_retry, name="campaign_retry"),
    path("scoring/<int:pk>/", views.scoring_detail, name="scoring"),
    path("scoring/<int:pk>/rescore/", views.scoring_rescore, name="scoring_rescore"),
    path("leaderboard/", leaderboard_views.leaderboard_page, name="leaderboard"),
    path("leaderboard/reference/", reference_views.reference_board, name="reference_board"),
    path("leaderboard/reference/download.csv", reference_views.reference_board_csv, name="reference_board_csv"),
    path("leaderboard/reference/download.xlsx", reference_views.reference_board_xlsx, name="reference_board_xlsx"),
    path(
        "scoring/<int:pk>/reference-results/", reference_views.export_reference_results, name="reference_results"
    ),  # fmt: skip
    path("leaderboard/download/<slug:fmt>/", leaderboard_views.leaderboard_download, name="leaderboard_download"),
    path("leaderboard/published/", leaderboard_views.published_import, name="published"),
    path("leaderboard/pin/", leaderboard_views.leaderboard_pin, name="leaderboard_pin"),
    path("leaderboard/unpin/<int:pk>/", leaderboard_views.leaderboard_unpin, name="leaderboard_unpin"),
    path("difficulty/", views.difficulty_filters, name="difficulty"),
]
