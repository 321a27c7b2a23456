"""Every case of the differential suite, from the tables of each area."""

from __future__ import annotations

from tests.differential import cases_admin, cases_data, cases_groups, cases_topics, cases_txn
from tests.differential.engine import Case

CASES: list[Case] = [
    *cases_topics.CASES,
    *cases_data.CASES,
    *cases_groups.CASES,
    *cases_txn.CASES,
    *cases_admin.CASES,
]
