"""Reviews of answers, every study type's (issue 27): reviewers (a member role) and
researchers accept or reject any answer with a reason, settle items whose answers disagree,
and work the flag queue with each item in context. ``registry`` (what each type's answer
is), ``selectors`` (reads), ``services`` (writes), ``views``/``urls`` (the Review page),
``api``/``serializers``/``api_urls`` (the REST endpoints), ``exclusions`` (a researcher's
rules taking a worker's answers out: ``core.exclusion_models``) and ``workers`` (each
worker's quality and time). A rejected or excluded answer leaves the estimates through
``core.exclusion_models.answers_kept`` / ``answers_kept_sql``, which every type's analysis
filters."""
