"""``manage.py import_eval_log <study> <log> [--format inspect|lm-eval|eee] [--model NAME]
[--task NAME]``: an evaluation log into a study of any type, as the admin's and the API's
import jobs do it (``core.services.eval_logs``), here and now; all or nothing, every
problem named by file and sample."""

from __future__ import annotations

import io
from pathlib import Path

from annotations.core.commands import ImportCommand
from annotations.core.services.eval_logs import eval_log_import
from annotations.core.services.eval_logs.formats import FORMATS, log_format


class Command(ImportCommand):
    help = ("Import an evaluation log (Inspect .eval/.json, lm-evaluation-harness "
            "--log_samples JSONL, Every Eval Ever instance-level JSONL) into a study of any "
            "type: its samples become the study's items, questions or sentences, the model's "
            "answers an AI system's (atomic; re-importing the same log changes nothing).")
    formats = ()
    summary_prefix = "Evaluation log: "

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--format", choices=sorted(FORMATS), dest="log_format",
                            help="the log's format (default: told from the file)")
        parser.add_argument("--model", default="", help="the evaluated model's name (needed "
                            "for lm-evaluation-harness samples files, which do not say it)")
        parser.add_argument("--task", default="", help="the task's name (default: the log's)")

    def run(self, study, opts):
        path = Path(opts["path"])
        data = path.read_bytes()
        fmt = log_format(path.name, data, opts["log_format"])
        return eval_log_import(study=study, source=io.BytesIO(data), name=path.name, fmt=fmt,
                               options={"model": opts["model"], "task": opts["task"]})
