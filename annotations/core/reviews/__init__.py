"""Reviews of answers, every study type's (issue 27): reviewers (a member role) and
researchers accept or reject any answer with a reason, settle items whose answers disagree,
and work the flag queue with each item in context. ``registry`` (what each type's answer
is), ``selectors`` (reads), ``services`` (writes), ``views``/``urls`` (the Review page),
``api``/``serializers``/``api_urls`` (the REST endpoints). A rejected answer leaves the
estimates through ``core.models.AnswerReview`` (``rejected_ids`` / ``not_rejected_sql``),
which every type's analysis filters."""
