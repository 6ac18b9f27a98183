"""`scripts/image.py`: pip's configuration becomes the Dockerfile's build arguments and mounts.

The build itself (buildah, debootstrap, root) runs in `tests/test_image.py` (`make test-image`).
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.utils.scripts import ROOT, load_script

pytestmark = pytest.mark.no_sql

MACHINE = [  # `pip config list` of a machine with local indexes (these development machines')
    "global.cert='/etc/ssl/certs/ca-certificates.crt'",
    "global.constraint='/etc/xdg/pip/constraints.txt'",
    "global.extra-index-url='file:///opt/pypi/simple file:///opt/more/simple'",
    "global.find-links='/opt/wheels'",
    ":env:.default-timeout='180'",
    ":env:.find-links='/opt/wheels'",
]


@pytest.fixture(scope="module")
def image() -> ModuleType:
    return load_script("scripts/image.py", "image_script")


def _pip(image: ModuleType, listing: list[str]) -> object:
    install = load_script("scripts/install.py", "install_script")
    return image.pip_for_build(install.pip_settings(listing))


def test_pips_sources_become_build_arguments_and_read_only_mounts(image: ModuleType) -> None:
    pip = _pip(image, MACHINE)
    assert pip.build_args == {
        "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
        "PIP_CONSTRAINT": "/etc/xdg/pip/constraints.txt",
        "PIP_EXTRA_INDEX_URL": "file:///opt/pypi/simple file:///opt/more/simple",
        "PIP_FIND_LINKS": "/opt/wheels",
    }
    # a file index's pages link to files beside it (../../files/...): its parent is mounted
    assert sorted(map(str, pip.mounts)) == [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/xdg/pip/constraints.txt",
        "/opt/more",
        "/opt/pypi",
        "/opt/wheels",
    ]
    assert pip.left_out == []  # the timeout changes nothing the build installs


def test_a_remote_index_is_passed_unmounted_and_unknown_options_are_named(
    image: ModuleType,
) -> None:
    pip = _pip(
        image,
        [
            "global.index-url='https://mirror.example/simple'",
            "global.find-links='file:///srv/wheels'",
            "global.only-binary=':all:'",
        ],
    )
    assert pip.build_args == {
        "PIP_INDEX_URL": "https://mirror.example/simple",
        "PIP_FIND_LINKS": "file:///srv/wheels",
    }
    assert pip.mounts == [Path("/srv/wheels")]
    assert pip.left_out == ["only-binary"]


def test_the_build_passes_the_base_the_variant_and_pips_sources(image: ModuleType) -> None:
    command = image.build_command("docsim:t", "localhost/base", "cpu", "ray", _pip(image, MACHINE))
    assert command[:3] == ["bud", "--isolation", "chroot"] and command[-1] == "."
    args = [command[i + 1] for i, a in enumerate(command) if a == "--build-arg"]
    assert "PYTHON_IMAGE=localhost/base" in args and "EXTRAS=ray" in args
    assert "TORCH_CPU_INDEX=" in args  # pip's own configuration gives torch's CPU wheel
    volumes = [command[i + 1] for i, a in enumerate(command) if a == "--volume"]
    assert "/opt/pypi:/opt/pypi:ro" in volumes and len(volumes) == 5


def test_the_dockerfile_declares_every_argument_the_build_passes(image: ModuleType) -> None:
    declared = set(re.findall(r"^ARG (\w+)", (ROOT / "Dockerfile").read_text(), re.M))
    passed = {*image.BUILD_ARGS.values(), "PYTHON_IMAGE", "VARIANT", "EXTRAS", "TORCH_CPU_INDEX"}
    assert passed <= declared
