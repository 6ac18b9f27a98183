"""`scripts/install.py`: uv gets the package sources pip's configuration names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.utils.scripts import load_script

pytestmark = pytest.mark.no_sql


@pytest.fixture(scope="module")
def install() -> ModuleType:
    return load_script("scripts/install.py", "install_script")


def test_each_option_takes_its_strongest_scope(install: ModuleType) -> None:
    listing = [
        "global.index-url='https://mirror.example/simple'",
        "global.find-links='/opt/old'",
        "global.extra-index-url='file:///opt/a file:///opt/b'",
        "install.index-url='https://install.example/simple'",
        "global.constraint='/etc/constraints.txt'",
        ":env:.find-links='/opt/w1 /opt/w2'",
        ":env:.default-timeout='180'",
        "not a setting",
    ]
    settings = install.pip_settings(listing)
    assert settings == {
        "index-url": "https://install.example/simple",
        "find-links": "/opt/w1 /opt/w2",
        "extra-index-url": "file:///opt/a file:///opt/b",
        "constraint": "/etc/constraints.txt",
        "default-timeout": "180",
    }
    assert install.uv_arguments(settings) == [
        "--index-strategy", "unsafe-best-match",
        "--default-index", "https://install.example/simple",
        "--index", "file:///opt/a",
        "--index", "file:///opt/b",
        "--find-links", "/opt/w1",
        "--find-links", "/opt/w2",
        "--constraint", "/etc/constraints.txt",
    ]  # fmt: skip


def test_no_index_is_passed_on(install: ModuleType) -> None:
    for value in ("true", "1", "y", "on"):
        settings = install.pip_settings([f":env:.no-index='{value}'", "global.find-links='/w'"])
        assert install.uv_arguments(settings)[-3:] == ["--find-links", "/w", "--no-index"]


def test_an_empty_value_leaves_the_weaker_scope_in_force(install: ModuleType) -> None:
    """As pip does: `PIP_INDEX_URL=` does not erase the configuration file's index."""
    listing = ["global.index-url='https://mirror.example/simple'", ":env:.index-url=''"]
    assert install.pip_settings(listing) == {"index-url": "https://mirror.example/simple"}


def test_options_uv_would_not_honour_leave_the_install_to_pip(install: ModuleType) -> None:
    machine = install.pip_settings(
        [
            "global.cert='/etc/ssl/certs/ca-certificates.crt'",
            "global.constraint='/etc/xdg/pip/constraints.txt'",
            "global.extra-index-url='file:///opt/pypi/simple'",
            ":env:.default-timeout='180'",
            ":env:.disable-pip-version-check='1'",
            ":env:.find-links='/opt/wheels'",
        ]
    )
    assert install.unknown_options(machine) == []
    stricter = {**machine, "only-binary": ":all:", "require-hashes": "1"}
    assert install.unknown_options(stricter) == ["only-binary", "require-hashes"]


def test_the_real_pip_listing_is_read(install: ModuleType, tmp_path: Path) -> None:
    """pip's own `config list` output, for a config file and an environment variable."""
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nextra-index-url = file:///a file:///b\n[install]\nindex-url = file:///c\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": str(config), "PIP_FIND_LINKS": "/w1 /w2"}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}  # no user pip.conf
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    settings = install.pip_settings(listing)
    assert settings["index-url"] == "file:///c"
    assert settings["extra-index-url"] == "file:///a file:///b"
    assert settings["find-links"] == "/w1 /w2"


def test_the_projects_dependencies_are_those_its_extras_name(install) -> None:  # noqa: ANN001
    """`--dependencies-of .[cpu,dev]` installs what `pip install -e .[cpu,dev]` would,
    without the project: its dependencies, each extra's, and those of an extra naming the
    project itself (followed once)."""
    pyproject = {
        "project": {
            "name": "docsim",
            "dependencies": ["numpy>=1.26", "torch>=2.3"],
            "optional-dependencies": {
                "cpu": ["torch==2.13.0", "faiss-cpu>=1.8"],
                "dev": ["pytest>=8", "docsim[ray,cpu]"],
                "ray": ["ray[data]>=2.52", "numpy>=1.26"],
            },
        }
    }
    got = install.project_dependencies(pyproject, ".[cpu, dev]")
    assert sorted(got) == sorted(
        ["numpy>=1.26", "torch>=2.3", "torch==2.13.0", "faiss-cpu>=1.8", "pytest>=8",
         "ray[data]>=2.52"]
    )  # fmt: skip
    assert install.project_dependencies(pyproject, ".") == ["numpy>=1.26", "torch>=2.3"]
