from annotations.core.commands import ImportCommand
from annotations.partitioned.services.predictions import predictions_import


class Command(ImportCommand):
    help = (
        "Import AI predictions from CSV or JSONL (atomic; progress on stderr). Fields: "
        "item_id, system, prediction (the option's text; a number is read as its text) or "
        "prediction_index (0-based option index). Predictions naming no option are counted "
        "per system."
    )
    update_help = "replace predictions that already exist"

    def run(self, study, opts):
        return predictions_import(study=study, source=opts["path"], fmt=opts["format"],
                                  update=opts["update"])
