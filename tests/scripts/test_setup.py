"""``scripts/setup`` with an unsupported Python: a clear message, and a
``.venv`` made with one is rebuilt (run on a copy of the script, in a tiny
project of the same name, so the real ``.venv`` is never touched)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "trio-mcp"
version = "0.0.1"
requires-python = ">=3.11"

[tool.hatch.build.targets.wheel]
packages = ["src/trio_mcp"]
"""


def _version(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


@pytest.fixture(scope="module")
def old_python() -> str:
    """A Python older than 3.11 with venv, from PATH or pyenv (skip when there is none)."""
    names = [shutil.which(f"python3.{minor}") for minor in (10, 9, 8)]
    pyenv = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    names += sorted(glob.glob(f"{pyenv}/versions/3.*/bin/python3"), reverse=True)
    for name in filter(None, names):
        version = _version(name)
        if version is not None and (3, 8) <= version < (3, 11):
            return name
    pytest.skip("no Python older than 3.11 on this machine to build the wrong .venv with")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup", tmp_path / "scripts" / "setup")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "src" / "trio_mcp").mkdir(parents=True)
    (tmp_path / "src" / "trio_mcp" / "__init__.py").write_text("")
    return tmp_path


def setup(project: Path, python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=project,
        env={**os.environ, "PYTHON": python},
    )


def test_an_unsupported_python_is_named(project: Path, old_python: str) -> None:
    out = setup(project, old_python)
    major, minor = _version(old_python) or (0, 0)
    assert out.returncode == 1
    assert f"is Python {major}.{minor}; trio-mcp needs Python >= 3.11" in out.stderr
    assert "Traceback" not in out.stderr and not (project / ".venv").exists()


def test_a_venv_of_an_unsupported_python_is_rebuilt(project: Path, old_python: str) -> None:
    subprocess.run(
        [old_python, "-m", "venv", "--without-pip", str(project / ".venv")], check=True, timeout=120
    )
    major, minor = _version(old_python) or (0, 0)
    out = setup(project, sys.executable)
    assert out.returncode == 0, out.stderr
    assert f".venv has Python {major}.{minor}; trio-mcp needs Python >= 3.11: rebuilding .venv" in out.stderr
    rebuilt = _version(str(project / ".venv" / "bin" / "python"))
    assert rebuilt is not None and rebuilt >= (3, 11)
    again = setup(project, sys.executable)  # idempotent: nothing to rebuild now
    assert again.returncode == 0 and "rebuilding" not in again.stderr
