"""How the suite is shared out among pytest-xdist workers. ``bash scripts/test``
runs ``pytest -n 2 --dist loadgroup`` (``-n 0``, or a plain ``pytest``, runs
serially, as before).

With ``--dist loadgroup`` each test is a unit of work of its own, except the
tests of one ``xdist_group``: those run on one worker, one after another. The
groups are made here, at collection:

* :data:`LOAD`: the tests that load the whole machine (the benchmarks' smoke
  tests, the soak): they never run at the same time as each other.
* A module whose tests share a module-scoped fixture (a real server, a
  conformance suite run) is a group of its own, so the fixture is set up once,
  not once per worker: found from the fixtures its tests request, plus
  :data:`MODULE_FIXTURES_BY_NAME` (modules that reach theirs through
  ``request.getfixturevalue``).

Every test keeps to its own resources, so any two may run at once: servers on
ports chosen at run time, files under its own ``tmp_path`` (each worker has its
own base temporary directory), caches under ``XDG_CACHE_HOME`` set to a
``tmp_path``, child processes checked as children of the worker that started them.
"""

from __future__ import annotations

from fnmatch import fnmatch

import pytest

#: The group of the tests that load the whole machine.
LOAD = "load"
#: Their modules.
LOAD_MODULES = (
    "tests/test_bench*_smoke.py",
    "tests/test_benchmarks_smoke.py",
    "tests/serving/http/test_soak.py",
)
#: Modules whose tests reach a module-scoped fixture by name only.
MODULE_FIXTURES_BY_NAME = ("tests/interop/test_server_everything.py",)

_SHARED_SCOPES = ("module", "package")


def _requests_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values())


def _group_of(module: str, shares_fixtures: bool) -> str | None:
    if any(fnmatch(module, pattern) for pattern in LOAD_MODULES):
        return LOAD
    if shares_fixtures or module in MODULE_FIXTURES_BY_NAME:
        return module
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    sharing = {item.nodeid.split("::", 1)[0] for item in items if _requests_a_module_fixture(item)}
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.nodeid.split("::", 1)[0]
        group = _group_of(module, module in sharing)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
