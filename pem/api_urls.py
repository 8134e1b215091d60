app_name = "pem_api"
urlpatterns: list = []
