from django.apps import AppConfig
from django.db.models.signals import post_migrate


class K12VistaConfig(AppConfig):
    name = "k12vista"
    verbose_name = "K12Vista Studio"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        # The project's modules below need the apps loaded (models), so ready() imports them. The Celery
        # app comes first, so that tasks' delay() finds its broker; then the system checks and run_job
        # register themselves (jobs.send_message sends run_job by name).
        from k12vista import celery, checks, tasks  # noqa: F401
        from k12vista.roles import sync_role_groups  # app loading: roles reads the auth models
        from k12vista.services import watch_credentials  # app loading: services reads the models

        # Each app registers its job handlers in its jobs.py.
        autodiscover_modules("jobs")
        # ... and the rules for reading their stored files in its files.py.
        autodiscover_modules("files")

        # Groups and their permissions follow the code after every migrate,
        # once every app's permissions exist.
        post_migrate.connect(sync_role_groups, dispatch_uid="k12vista.sync_role_groups")
        # A password change or a disabled account revokes the API token.
        watch_credentials()
