"""The suite's own rule: without PostgreSQL its half skips with a how-to, except in CI."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=1"


def _run_one_test(ci: str) -> subprocess.CompletedProcess[str]:
    environment = os.environ | {"CONTEXT_STORE_TEST_POSTGRES_URL": UNREACHABLE, "CI": ci}
    environment.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/platform/test_operations.py::test_healthz_needs_no_key",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("ci", ["", "false"])
def test_without_postgresql_its_tests_skip_and_say_how_to_enable_them(ci):
    result = _run_one_test(ci)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout
    assert "CONTEXT_STORE_TEST_POSTGRES_URL" in result.stdout


def test_in_ci_a_missing_postgresql_fails_the_run():
    result = _run_one_test("true")
    assert result.returncode != 0
    assert "CI=true requires the PostgreSQL tests" in result.stdout
