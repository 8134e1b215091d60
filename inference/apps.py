from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured


class InferenceConfig(AppConfig):
    name = "inference"

    def ready(self) -> None:
        checks.register(check_model_url_allowlist)
        # apps.py is loaded before the models; ready() runs once they are.
        from inference.call_rates import calls_ended_since
        from inference.gpu_classes import check_gpu_classes, queues
        from k12vista import jobs, metrics

        checks.register(check_gpu_classes)
        jobs.more_queues_from(queues)  # the settings page checks each GPU class's workers

        metrics.count_calls_with(calls_ended_since)  # the jobs page's calls a second per endpoint


def check_model_url_allowlist(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """A malformed MODEL_URL_ALLOWLIST entry would refuse every endpoint; say so at start-up."""
    from django.conf import settings

    from inference import client  # apps.py is loaded before the models; the check runs once they are

    problems: list[checks.CheckMessage] = []
    for entry in settings.MODEL_URL_ALLOWLIST:
        try:
            client.parse_allowed_prefix(entry)
        except ImproperlyConfigured as exc:
            problems.append(checks.Error(str(exc), id="inference.E001"))
    for name, urls in settings.MODEL_API_KEY_URLS.items():
        for entry in urls:
            try:
                client.parse_allowed_prefix(entry)
            except ImproperlyConfigured as exc:
                problems.append(checks.Error(f"MODEL_API_KEY_URLS[{name!r}]: {exc}", id="inference.E003"))
    if any(entry.strip() in ("", "*") for entry in settings.MODEL_API_KEY_VARIABLES):
        problems.append(checks.Error("MODEL_API_KEY_VARIABLES may not admit every variable (*)", id="inference.E002"))
    return problems
