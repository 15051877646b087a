"""A trace that passes the format verifier (the stand-in endpoint's fixture, ``standin``,
is in tests/conftest.py: the critique tests use it too)."""

from __future__ import annotations

import copy

GOOD_TRACE = {
    "searches": [
        {"query": "strawberries vitamin C", "results": [
            {"title": "Strawberries, raw - USDA FoodData Central",
             "url": "https://fdc.nal.usda.gov/strawberries",
             "snippet": "Nutrient name: Vitamin C, total ascorbic acid. Amount per 100g: "
                        "58.8 mg."},
            {"title": "Bioactive Compounds in Berries - NCBI",
             "url": "https://www.ncbi.nlm.nih.gov/berries",
             "snippet": "Amongst the fruits, fresh strawberries are considered to be one with "
                        "the highest content of ascorbic acid."},
        ]},
        {"query": "recommended daily vitamin C", "results": [
            {"title": "Vitamin C - NHS", "url": "https://www.nhs.uk/vitamin-c",
             "snippet": "Adults aged 19 to 64 need 40mg of vitamin C a day."},
        ]},
    ],
    "evidence": [
        {"id": 1, "url": "https://www.ncbi.nlm.nih.gov/berries", "title": "NCBI",
         "quote": "fresh strawberries are considered to be one with the highest content of "
                  "ascorbic acid"},
        {"id": 2, "url": "https://www.nhs.uk/vitamin-c", "title": "NHS",
         "quote": "Adults aged 19 to 64 need 40mg of vitamin C a day."},
        {"id": 3, "url": "https://fdc.nal.usda.gov/strawberries", "title": "USDA",
         "quote": "Amount per 100g: 58.8 mg."},
    ],
    "claims": [
        {"text": "Strawberries are a source of vitamin C.",
         "reasoning": "Two sources confirm it [1, 3].", "evidence_ids": [1, 3],
         "verdict": "Accurate"},
        {"text": "100 g covers more than the daily need.",
         "reasoning": "Adults need 40 mg a day [2]; 100 g give 58.8 mg [3].",
         "evidence_ids": [2, 3], "verdict": "Accurate"},
    ],
    "verdict": "Accurate",
    "reasoning": "Both claims are supported.",
}


def good_trace(**changes) -> dict:
    trace = copy.deepcopy(GOOD_TRACE)
    trace.update(changes)
    return trace
