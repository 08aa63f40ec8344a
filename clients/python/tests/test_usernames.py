"""The usernames this client builds, against clients/test-vectors/usernames.json: the file the
service's tests read too (they check every built username reads back as its key and choices)."""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List

import pytest

from exitpool_client import PARAMETER_NAMES, UNSUPPORTED_PARAMETER_NAMES, InvalidSessionChoice, build_username

from conftest import DATA

VECTORS: Dict[str, Any] = json.loads((DATA / "usernames.json").read_text(encoding="utf-8"))
BUILT: List[Dict[str, Any]] = VECTORS["built"]


def test_knows_every_name_the_service_reads_or_refuses() -> None:
    assert sorted(PARAMETER_NAMES) == sorted(VECTORS["parameter_names"])
    assert sorted(UNSUPPORTED_PARAMETER_NAMES) == sorted(VECTORS["unsupported_parameter_names"])


def _build(v: Dict[str, Any]) -> str:
    c = v["choices"]
    return build_username(v["key"], c.get("countries"), c.get("lifetime_seconds"), c.get("mode"))


@pytest.mark.parametrize("vector", [v for v in BUILT if "username" in v], ids=lambda v: str(v["username"]))
def test_builds_the_vector(vector: Dict[str, Any]) -> None:
    assert _build(vector) == vector["username"]


@pytest.mark.parametrize("vector", [v for v in BUILT if "invalid" in v], ids=lambda v: str(v["invalid"]))
def test_refuses_what_the_service_would(vector: Dict[str, Any]) -> None:
    with pytest.raises(InvalidSessionChoice, match=re.compile(vector["invalid"])):
        _build(vector)
