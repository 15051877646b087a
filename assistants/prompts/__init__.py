"""Prompt templates researchers can edit, and the parsers for what the models answer.

Templates are plain text with ``{{name}}`` placeholders (spaces inside the braces allowed).
Everything else is literal, so a JSON example in a prompt needs no escaping (a ``{`` or
``}}`` is just text; only ``{{`` must start a placeholder). Rendering is one pass: a
value is inserted as it is and never scanned for placeholders itself. Why not
``str.format_map``: every brace of the JSON example would have to be doubled. Why not
Django's template engine: tags and filters would make a prompt a program, an unknown
variable renders as nothing, and auto-escaping would turn quotes into ``&quot;``.

Kinds and their placeholders are in ``PLACEHOLDERS``; ``validate_template`` names unknown or
missing ones. Model output is parsed by fixed, documented rules (``parse_option_letter``,
``parse_critique``): what does not follow them is unparseable (None), never guessed.

Modules: ``templates`` (kinds, placeholders, validation, rendering, fields), ``parsing``,
``defaults`` (the platform's prompts); the public names are re-exported here.
"""

from assistants.prompts.defaults import (
    CRITIQUE,
    DEFAULT_TEMPLATES,
    FACTUALITY_GIVEN_RESULTS,
    FACTUALITY_OWN_SEARCHES,
    RESPONSE,
)
from assistants.prompts.parsing import (
    CHOICE_FIRST,
    CHOICE_NEITHER,
    CHOICE_SECOND,
    ParsedCritique,
    ParsedResponse,
    parse_critique,
    parse_option_letter,
    parse_response,
)
from assistants.prompts.templates import (
    KINDS,
    LEVEL_NAMES,
    MAX_OPTIONS,
    MAX_TEMPLATE_CHARS,
    NO_CHAIN,
    PLACEHOLDERS,
    REQUIRED,
    PromptTemplate,
    TemplateError,
    critique_fields,
    factuality_fields,
    format_chain,
    format_options,
    format_searches,
    option_letters,
    placeholders_in,
    render,
    response_fields,
    validate_template,
)

__all__ = [
    "CHOICE_FIRST",
    "CHOICE_NEITHER",
    "CHOICE_SECOND",
    "CRITIQUE",
    "DEFAULT_TEMPLATES",
    "FACTUALITY_GIVEN_RESULTS",
    "FACTUALITY_OWN_SEARCHES",
    "KINDS",
    "LEVEL_NAMES",
    "MAX_OPTIONS",
    "MAX_TEMPLATE_CHARS",
    "NO_CHAIN",
    "PLACEHOLDERS",
    "ParsedCritique",
    "ParsedResponse",
    "PromptTemplate",
    "REQUIRED",
    "RESPONSE",
    "TemplateError",
    "critique_fields",
    "factuality_fields",
    "format_chain",
    "format_options",
    "format_searches",
    "option_letters",
    "parse_critique",
    "parse_option_letter",
    "parse_response",
    "placeholders_in",
    "render",
    "response_fields",
    "validate_template",
]
