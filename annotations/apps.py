from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Studies and annotations"

    def ready(self) -> None:
        # Each study type plugs its task kind, recompute, opening, dashboard and import
        # kinds into the core (annotations/<type>/hooks.py): the core never imports a type.
        from annotations.assisted import hooks as assisted
        from annotations.core.services import eval_logs
        from annotations.critique import hooks as critique
        from annotations.partitioned import hooks as partitioned

        eval_logs.register()  # the "eval_log" import kind; each type registers its writer
        for study_type in (partitioned, assisted, critique):
            study_type.register()
        # the evaluation service's dashboard panel (above the study types: it registers)
        from annotations.evaluation import hooks as evaluation

        evaluation.register()
        # audits' uploaded files run as import jobs of kind "audit" (annotations.audit)
        from annotations.audit.services import uploads as audit_uploads

        audit_uploads.register()
        # notices to researchers' endpoints (annotations.webhooks: a listener of the core's)
        from annotations.webhooks.services import deliveries as webhooks

        webhooks.register()
        # every Celery task registered in this process too: services start them by name
        import annotations.tasks  # noqa: F401

        # a password a researcher handed out signs in once (annotations/core/accounts.py)
        self._one_time_passwords()

    @staticmethod
    def _one_time_passwords() -> None:
        from django.contrib.auth.signals import user_logged_in

        from annotations.core.accounts import one_time_password_spend

        user_logged_in.connect(one_time_password_spend, dispatch_uid="one_time_password_spend")
