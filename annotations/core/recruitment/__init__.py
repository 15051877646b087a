"""Recruitment from crowd platforms, every study type's (``core.recruitment_models``):
``platforms`` (each platform's parameters, checked, and where participants go back to),
``services`` (arrival, consent, screening, progress, completion, return, time-outs),
``views``/``urls`` (the participant's pages under ``/join/<token>/``) and ``middleware``
(``ParticipantGate``: a participant's session reaches only their study's pages while
working, is sent back to their step otherwise, and an MTurk participant's pages may be
framed by MTurk alone)."""
