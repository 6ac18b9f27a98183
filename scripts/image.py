"""Build the project's container image without a Docker engine: `make image`.

The development machines have no Docker engine and no registry to pull the Python base image
from. Debian's buildah builds the project's own `Dockerfile` instead (vfs storage and chroot
isolation: no daemon, no overlay mounts, no user namespaces) from a base bootstrapped out of
Debian's packages (`debootstrap --variant=minbase` with Python 3.11, which is bookworm's), and
pip inside the build reaches the package indexes this machine reaches: its pip configuration
(`pip config list`) becomes the Dockerfile's `PIP_*` build arguments, and every local file or
folder that configuration names (a wheel folder, a file index, a CA bundle, a constraints
file) is mounted read-only at the same path for the build. Nothing is written into the image
that a `docker build` elsewhere would not write: the arguments' defaults stay the public ones.

    python scripts/image.py base                    # localhost/docsim-base:bookworm, once
    python scripts/image.py build --tag docsim:latest [--variant cpu] [--extras ray]

Both print what they did as JSON (the image, its size, the seconds taken). They need root
(debootstrap, and buildah's chroot isolation), and the packages `buildah` and `debootstrap`.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from install import pip_settings  # noqa: E402  (the same reading of pip's configuration)

logger = logging.getLogger("image")

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = "localhost/docsim-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# what the Dockerfile needs of `python:3.11-slim-bookworm`: `python` 3.11 with venv and pip
# (ensurepip), and the CA certificates
BASE_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
# pip's option -> the Dockerfile's build argument (pip reads them as its PIP_* variables)
BUILDAH = ("buildah", "--storage-driver", "vfs")
BUILD_ARGS = {
    "index-url": "PIP_INDEX_URL",
    "extra-index-url": "PIP_EXTRA_INDEX_URL",
    "find-links": "PIP_FIND_LINKS",
    "cert": "PIP_CERT",
    "constraint": "PIP_CONSTRAINT",
}
# options that do not change where packages come from, which the build may leave out
IGNORED = {"timeout", "default-timeout", "retries", "disable-pip-version-check", "no-cache-dir"}


@dataclass
class PipForBuild:
    """pip's configuration as a build sees it: the build arguments, and the local paths they
    name, to be mounted read-only at the same paths."""

    build_args: dict[str, str] = field(default_factory=dict)
    mounts: list[Path] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # options no build argument carries


def local_path(value: str) -> Path | None:
    """The local file or folder that one of pip's values names (a path, or a file: URL), or
    None for a remote URL."""
    parsed = urlparse(value)
    if parsed.scheme == "file":
        # a file index's pages (`ROOT/simple/NAME/`) link to files beside the index
        # (`../../files/...`): the folder that holds the index is mounted
        path = Path(parsed.path)
        return path.parent if path.name == "simple" else path
    if not parsed.scheme and value.startswith("/"):
        return Path(value)
    return None


def pip_for_build(settings: dict[str, str]) -> PipForBuild:
    """`settings` (pip's winning values, as `install.pip_settings` reads them) as the
    Dockerfile's build arguments and the mounts they need."""
    out = PipForBuild()
    for key, value in sorted(settings.items()):
        if key not in BUILD_ARGS:
            if key not in IGNORED:
                out.left_out.append(key)
            continue
        out.build_args[BUILD_ARGS[key]] = value
        for token in value.split():
            path = local_path(token)
            if path is not None and path not in out.mounts:
                out.mounts.append(path)
    return out


def buildah(*args: str, capture: bool = False) -> str:
    """Runs `buildah` on vfs storage (no overlay mounts here); its stdout when `capture`."""
    command = [*BUILDAH, *args]
    logger.debug("%s", " ".join(command))
    done = subprocess.run(
        command, check=True, text=True, stdout=subprocess.PIPE if capture else None
    )
    return done.stdout.strip() if capture else ""


def image_exists(name: str) -> bool:
    return image_id(name) is not None


def image_id(name: str) -> str | None:
    command = [*BUILDAH, "images", "--quiet", "--no-trunc", name]
    done = subprocess.run(command, capture_output=True, text=True)
    return done.stdout.split()[0] if done.returncode == 0 and done.stdout.strip() else None


def remove_images(*names: str) -> None:
    """Removes the images `names` where they exist (vfs keeps each one whole on disk)."""
    for name in names:
        if image_id(name) is not None:
            subprocess.run([*BUILDAH, "rmi", "--force", name], capture_output=True)


def image_bytes(name: str) -> int:
    """The image's size: its layers' uncompressed bytes (what `docker images` shows)."""
    inspected = json.loads(buildah("inspect", "--type", "image", name, capture=True))
    return sum(int(layer["size"]) for layer in json.loads(inspected["Manifest"])["layers"])


def bootstrap_base(name: str = BASE_IMAGE, mirror: str = DEBIAN_MIRROR) -> dict:
    """Commits `name`: Debian bookworm's minimal system with Python 3.11, from `mirror`."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="docsim-base-") as work:
        rootfs = Path(work) / "rootfs"
        include = ",".join(BASE_PACKAGES)
        logger.info("debootstrap bookworm (%s) from %s", include, mirror)
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={include}", "bookworm", str(rootfs),
             mirror],
            check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        archive = Path(work) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
        container = buildah("from", "scratch", capture=True)
        try:
            buildah("add", container, str(archive), "/")
            buildah("config", "--env", "LANG=C.UTF-8", "--cmd", '["python"]', container)
            buildah("commit", "--quiet", container, name, capture=True)
        finally:
            subprocess.run([*BUILDAH, "rm", container], capture_output=True)
    return {"image": name, "bytes": image_bytes(name), "seconds": time.perf_counter() - started}


def machine_pip() -> PipForBuild:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], check=True, capture_output=True, text=True
    )
    return pip_for_build(pip_settings(listed.stdout.splitlines()))


def build_command(tag: str, base: str, variant: str, extras: str, pip: PipForBuild) -> list[str]:
    """`buildah bud`'s arguments for the Dockerfile: the base, the variant, and pip's
    configuration instead of the public indexes (TORCH_CPU_INDEX empty: pip's own)."""
    args = {"PYTHON_IMAGE": base, "VARIANT": variant, "EXTRAS": extras, "TORCH_CPU_INDEX": ""}
    args |= pip.build_args
    command = ["bud", "--isolation", "chroot", "--layers=false", "-f", "Dockerfile", "-t", tag]
    for key, value in args.items():
        command += ["--build-arg", f"{key}={value}"]
    for path in pip.mounts:
        command += ["--volume", f"{path}:{path}:ro"]
    return [*command, "."]


def build_image(tag: str, base: str = BASE_IMAGE, variant: str = "cpu", extras: str = "") -> dict:
    """Builds the Dockerfile as `tag` (bootstrapping `base` first where it is missing)."""
    built_base = None if image_exists(base) else bootstrap_base(base)
    pip = machine_pip()
    if pip.left_out:
        logger.warning("pip's options %s are not passed to the build", pip.left_out)
    previous = image_id(tag)
    started = time.perf_counter()
    command = build_command(tag, base, variant, extras, pip)
    subprocess.run([*BUILDAH, *command], check=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if previous is not None and previous != image_id(tag):  # untagged now: not kept whole
        subprocess.run([*BUILDAH, "rmi", previous], capture_output=True)
    return {
        "image": tag,
        "variant": variant,
        "extras": extras,
        "base": base,
        "base_built": built_base,
        "bytes": image_bytes(tag),
        "seconds": seconds,
    }


def main(argv: Sequence[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    base = commands.add_parser("base", help="bootstrap the Debian base image")
    base.add_argument("--name", default=BASE_IMAGE)
    base.add_argument("--mirror", default=DEBIAN_MIRROR)
    build = commands.add_parser("build", help="build the Dockerfile")
    build.add_argument("--tag", default="docsim:latest")
    build.add_argument("--base", default=BASE_IMAGE)
    build.add_argument("--variant", default="cpu", choices=("cpu", "gpu"))
    build.add_argument("--extras", default="")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if missing:
        parser.error(f"needs {' and '.join(missing)} (apt-get install buildah debootstrap)")
    if args.command == "base":
        done = bootstrap_base(args.name, args.mirror)
    else:
        done = build_image(args.tag, args.base, args.variant, args.extras)
    print(json.dumps(done, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
