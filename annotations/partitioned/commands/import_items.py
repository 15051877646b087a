from annotations.core.commands import ImportCommand
from annotations.partitioned.services.imports import items_import


class Command(ImportCommand):
    help = ("Import items into a study from CSV or JSONL (atomic; progress on stderr). "
            "Fields: id, text, options, stratum, gold (the right option's text) or "
            "gold_index (its 0-based index), quality_check, metadata.")
    update_help = "rewrite items whose ids already exist"
    summary_prefix = "Items: "

    def run(self, study, opts):
        return items_import(study=study, source=opts["path"], fmt=opts["format"],
                            update=opts["update"])
