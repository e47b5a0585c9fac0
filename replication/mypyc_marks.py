"""mypyc's mark for a mixin, for the opt-in compiled build (bench/build_compiled.py):
PartitionReplica is made of mixins, and mypyc compiles a class with more than one base
only when the others are traits. `trait` comes from mypy_extensions, where it returns the
class unchanged; without it installed (it comes with mypy, a test dependency) this one
does the same: nothing."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

try:
    from mypy_extensions import trait
except ImportError:  # a runtime without mypy: the mark means nothing to the interpreter

    def trait(cls: T) -> T:
        return cls


__all__ = ["trait"]
