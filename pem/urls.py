app_name = "pem"
# PEBench screens are added by the PEBench issue.
urlpatterns: list = []
