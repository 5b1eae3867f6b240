"""Every test is ``unit`` (no sandbox, no subprocess, no network server, no Docker) or ``e2e``:
``scripts/test --fast`` runs ``-m unit``, the plain run both. A pytest plugin, loaded by the root
conftest.py for every test folder.

A module states its default (``pytestmark = pytest.mark.unit``) and a test that differs carries
its own mark, which wins. A test that is classified neither way (or both ways on the same level)
fails collection, naming it, so a new test cannot silently fall out of the fast set or into it.
Benchmarks (``bench``, tests/bench) are neither: they never run with these.
"""

from __future__ import annotations

import pytest

#: The kinds every test is exactly one of; ``bench`` tests are exempt (they never run with these).
TEST_KINDS = ("unit", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test exactly one kind, ``unit`` or ``e2e``, or refuse the collection.

    A module states its default (``pytestmark = pytest.mark.unit``) and a test that differs
    carries its own mark, which wins: the closest mark is the test's kind. The kind is then put on
    the test itself and taken off the module and class, so ``-m unit`` and ``-m e2e`` select
    exactly the two halves. A test with no kind, or with both on the same level, is an error that
    names it. This plugin is registered with the root conftest, before any deeper one, so this
    plain hook runs after theirs (tests/bench marks its tests ``bench`` there) and before ``-m``
    deselects anything: every collected test is checked, whatever ``-m`` asks for."""
    problems: list[str] = []
    classified: list[tuple[pytest.Item, str]] = []
    for item in items:
        kinds: set[str] = set()
        for node in reversed(item.listchain()):  # the test first, then its class, module, ...
            kinds = {mark.name for mark in node.own_markers if mark.name in TEST_KINDS}
            if kinds:
                break
        if len(kinds) == 1:
            classified.append((item, kinds.pop()))
        elif kinds:
            problems.append(f"  {item.nodeid}: marked both {' and '.join(TEST_KINDS)}")
        elif item.get_closest_marker("bench") is None:
            problems.append(f"  {item.nodeid}: marked neither {' nor '.join(TEST_KINDS)}")
    if problems:
        raise pytest.UsageError(
            f"{len(problems)} test(s) need exactly one of the marks `unit` (no sandbox, no subprocess, "
            "no network server, no Docker) or `e2e`: a module's `pytestmark = pytest.mark.unit`, or "
            "the test's own `@pytest.mark.e2e` where it differs from its module:\n" + "\n".join(problems)
        )
    for item, kind in classified:
        if not any(mark.name == kind for mark in item.own_markers):
            item.add_marker(kind)
        for node in item.listchain()[:-1]:
            node.own_markers[:] = [mark for mark in node.own_markers if mark.name not in TEST_KINDS]
