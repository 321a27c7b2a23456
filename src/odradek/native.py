"""The one name compiled modules need from mypy_extensions, with a stand-in where it is not installed.

`mypyc_attr(native_class=False)` keeps a class of a compiled module (tools/build_native.py) an
ordinary Python class whose methods are compiled: others may still patch or subclass it.
"""

from __future__ import annotations

from collections.abc import Callable

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # no mypyc here: nothing is compiled, the decorator does nothing

    def mypyc_attr(*_: str, **__: object) -> Callable[[type], type]:  # type: ignore[misc]
        return lambda cls: cls
