from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Studies and annotations"

    def ready(self) -> None:
        # Each task kind registers itself with the engine when its module is imported; the
        # reclaim sweeper must know every kind.
        import annotations.services.assisted.rating  # noqa: F401
        import annotations.services.critique.analysis  # noqa: F401 - critique recompute
        import annotations.services.critique.assignment  # noqa: F401 - critique task kind
        import annotations.services.routing  # noqa: F401
        from annotations.services.assisted_analysis import connect_signals, recompute_register

        connect_signals()  # the assisted analysis recomputes after each rating
        recompute_register()
