from django.apps import AppConfig


class PemConfig(AppConfig):
    name = "pem"
