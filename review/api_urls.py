app_name = "review_api"
urlpatterns: list = []
