"""The worked examples in the data modules' docstrings stay true (doctest)."""

from __future__ import annotations

import doctest

import pytest

from ssmrepro.data import listops, pathfinder, text


@pytest.mark.parametrize("module", [listops, text, pathfinder], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
