"""A report as the JSON document `--json` prints (and the Python API's `.report` holds)."""

from __future__ import annotations

import json
import math


def finite_json(value):
    """JSON has no inf or NaN: a kernel that produced one is reported as the string "inf"/"nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def json_text(document: dict) -> str:
    return json.dumps(finite_json(document), indent=2, allow_nan=False)


def json_document(document: dict) -> dict:
    """Exactly what a script reading `--json` gets back: the printed text, parsed."""
    return json.loads(json_text(document))
