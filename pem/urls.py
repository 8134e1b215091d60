app_name = "pem"
urlpatterns: list = []
