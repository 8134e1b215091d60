from django.urls import path

from inference import api, campaign_api, endpoint_api

app_name = "inference_api"
urlpatterns = [
    path("endpoints/", api.EndpointList.as_view(), name="endpoints"),
    path("endpoints/<int:pk>/test/", api.endpoint_test, name="endpoint_test"),
    path("runs/", api.RunList.as_view(), name="runs"),
    path("runs/<int:pk>/", api.RunDetail.as_view(), name="run"),
    path("runs/<int:pk>/responses/", api.RunResponses.as_view(), name="responses"),
    path("campaigns/", campaign_api.CampaignList.as_view(), name="campaigns"),
    path("campaigns/<int:pk>/", campaign_api.CampaignDetail.as_view(), name="campaign"),
    path("leaderboard/", api.leaderboard_json, name="leaderboard"),
    path("leaderboard/pins/", api.leaderboard_pin, name="leaderboard_pin"),
    path("leaderboard/pins/<int:pk>/", api.leaderboard_unpin, name="leaderboard_unpin"),
]

# --- the whole pipeline: scoring, assist runs, difficulty filters (issue 15) ---
urlpatterns += [
    path("runs/<int:pk>/retry/", api.run_retry, name="run_retry"),
    path("runs/<int:pk>/scoring/", api.RunScoringList.as_view(), name="run_scoring"),
    path("scoring/", api.ScoringList.as_view(), name="scoring_runs"),
    path("scoring/<int:pk>/", api.ScoringDetail.as_view(), name="scoring"),
    path("scoring/<int:pk>/judgments/", api.ScoringJudgments.as_view(), name="judgments"),
    path("scoring/<int:pk>/rescore/", api.scoring_rescore, name="scoring_rescore"),
    path("assist/", api.AssistList.as_view(), name="assist_runs"),
    path("assist/<int:pk>/", api.AssistDetail.as_view(), name="assist_run"),
    path("assist/<int:pk>/retry/", api.assist_retry, name="assist_retry"),
    path("difficulty-filters/preview/", api.filters_preview, name="filters_preview"),
    path("difficulty-filters/confirm/", api.filters_confirm, name="filters_confirm"),
]

# --- endpoint edit and switch-off, campaign retry (issue 29) ---
urlpatterns += [
    path("endpoints/<int:pk>/", endpoint_api.endpoint_detail, name="endpoint"),
    path("endpoints/<int:pk>/deactivate/", endpoint_api.endpoint_deactivate, name="endpoint_deactivate"),
    path("campaigns/<int:pk>/retry/", campaign_api.campaign_retry, name="campaign_retry"),
]
