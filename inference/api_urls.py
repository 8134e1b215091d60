from django.urls import path

from inference import api, campaign_api

app_name = "inference_api"
urlpatterns = [
    path("endpoints/", api.EndpointList.as_view(), name="endpoints"),
    path("runs/", api.RunList.as_view(), name="runs"),
    path("runs/<int:pk>/", api.RunDetail.as_view(), name="run"),
    path("runs/<int:pk>/responses/", api.RunResponses.as_view(), name="responses"),
    path("campaigns/", campaign_api.CampaignList.as_view(), name="campaigns"),
    path("campaigns/<int:pk>/", campaign_api.CampaignDetail.as_view(), name="campaign"),
    path("leaderboard/", api.leaderboard_json, name="leaderboard"),
    path("leaderboard/pins/", api.leaderboard_pin, name="leaderboard_pin"),
    path("leaderboard/pins/<int:pk>/", api.leaderboard_unpin, name="leaderboard_unpin"),
]
