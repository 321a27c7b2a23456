"""The differential protocol suite (issue 34): every case of the tables sent to Apache Kafka 3.9 and
to odradek, their answers compared field by field (tests/differential/engine.py). A case without a
deviation must find no difference; a case with one must find exactly the lines deviations.py records
for it, so that a change on either side (a fix, a regression) fails it. See docs/differential.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.differential.cases import CASES
from tests.differential.deviations import CASE_DEVIATIONS, CASE_FIXES, DEVIATIONS, FIXES
from tests.differential.engine import Case, Pair, run_case

DOC = Path(__file__).resolve().parents[2] / "docs" / "differential.md"

# the file runs for a minute or two: `make test` starts it first (tests/conftest.py's file order)
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_same_answers(pair: Pair, case: Case) -> None:
    lines = run_case(pair, case)
    record = os.environ.get("ODRADEK_DIFFERENTIAL_RECORD")
    if record and lines:  # the lines to put in deviations.py once the difference is understood
        with open(record, "a") as out:
            out.write(json.dumps({"id": case.id, "lines": lines}) + "\n")
    if case.id not in CASE_DEVIATIONS:
        assert not lines, "Kafka and odradek differ:\n" + "\n".join(lines)
    else:
        name, expected = CASE_DEVIATIONS[case.id]
        assert sorted(lines) == sorted(expected), f"deviation {name} changed; now:\n" + "\n".join(
            f"    {line!r}," for line in lines
        )


def test_the_tables_are_consistent() -> None:
    """Case ids are unique, every recorded deviation and fix names a case and a known reason, and
    docs/differential.md names every deviation and fix (the counts are checked there too)."""
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert set(CASE_DEVIATIONS) <= set(ids)
    assert set(CASE_FIXES) <= set(ids)
    assert {name for name, _ in CASE_DEVIATIONS.values()} == set(DEVIATIONS)
    assert set(CASE_FIXES.values()) == set(FIXES)
    doc = DOC.read_text()
    for name in [*DEVIATIONS, *FIXES]:
        assert f"`{name}`" in doc, f"docs/differential.md does not name {name}"
    apis = set().union(*(case.apis for case in CASES))
    assert len(CASES) >= 250 and len(apis) >= 40, (len(CASES), len(apis))
    assert f"{len(CASES)} cases" in doc and f"{len(apis)} APIs" in doc
