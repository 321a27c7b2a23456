"""Fixtures for the protocol tests.

Hypothesis's pytest plugin imports its patch writer (and through it libcst, which emits a
DeprecationWarning) only when a property fails; with warnings as errors that turns a clean failure
report into an INTERNALERROR. Importing it here, with that warning silenced, keeps failures readable.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import hypothesis.extra._patching  # noqa: F401
