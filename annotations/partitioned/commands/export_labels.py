from annotations.core.commands import ExportCommand
from annotations.partitioned.services.exports import labels_export


class Command(ExportCommand):
    help = "Export every answered query of a study with its routing metadata (CSV or JSONL)."
    rows = "labels"

    def export(self, study, out, opts) -> int:
        return labels_export(study=study, out=out, fmt=opts["format"])
