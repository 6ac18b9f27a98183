"""`pip install ARGS` into this interpreter's environment, done by uv under pip's configuration.

`make setup` installs through this script: uv installs the same packages from the same indexes
in a fraction of pip's time (on the 2-core development machine, the test dependencies took
about 7 s against 40 s), but it reads no pip configuration. A machine whose packages come from
a mirror, a wheel folder or a constraints file says so in pip's configuration (`pip.conf`,
`PIP_*`), so the script reads it with `pip config list` and hands uv the same settings. uv is
installed into the environment by pip first. Where uv is missing or fails, pip installs
instead, so setup never depends on uv.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import subprocess
import sys
from collections.abc import Sequence

logger = logging.getLogger("install")

# pip's option -> uv's flag, for the options that choose where packages come from
FLAGS = {
    "index-url": "--default-index",
    "extra-index-url": "--index",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
# Options uv is told about (FLAGS, `no-index`, `cert`) or that change nothing it installs. Any
# other (`only-binary`, `pre`, `require-hashes`, `trusted-host`, `proxy`, ...) could make uv
# install something pip would not: then pip installs.
UNDERSTOOD = {
    *FLAGS,
    "no-index",
    "cert",
    "timeout",
    "default-timeout",
    "retries",
    "disable-pip-version-check",
    "no-cache-dir",
    "progress-bar",
    "quiet",
    "verbose",
    "root-user-action",
    "config-file",
}
TRUE = {"1", "true", "yes", "on", "y", "t"}  # pip's strtobool
# `pip config list` scopes, weakest first: files' [global], then their [install], then PIP_*
SCOPES = ("global", "install", ":env:")


def pip_settings(listing: Sequence[str]) -> dict[str, str]:
    """The winning value of each option in `pip config list`'s lines (`scope.key='value'`)."""
    chosen: dict[str, tuple[int, str]] = {}
    for line in listing:
        name, sep, quoted = line.partition("=")
        scope, _, key = name.strip().rpartition(".")
        if not sep or scope not in SCOPES:
            continue
        rank, value = SCOPES.index(scope), str(ast.literal_eval(quoted.strip()))
        if not value:  # pip skips an empty value, and a weaker scope's applies
            continue
        if key not in chosen or rank >= chosen[key][0]:  # later files override earlier ones
            chosen[key] = (rank, value)
    return {key: value for key, (_, value) in chosen.items()}


def uv_arguments(settings: dict[str, str]) -> list[str]:
    """uv's flags for pip's settings. pip considers every index for every package and takes
    the best version; uv, by default, only the first index that has the package."""
    args = ["--index-strategy", "unsafe-best-match"]
    for key, flag in FLAGS.items():
        for value in settings.get(key, "").split():
            args += [flag, value]
    if settings.get("no-index", "").lower() in TRUE:
        args.append("--no-index")
    return args


def unknown_options(settings: dict[str, str]) -> list[str]:
    """pip's options set here that uv would not honour (pip must install then)."""
    return sorted(set(settings) - UNDERSTOOD)


def uv_install(argv: Sequence[str], pip: list[str]) -> bool:
    """Install `argv` with uv under pip's settings; False where pip should do it instead."""
    listed = subprocess.run([*pip, "config", "list"], capture_output=True, text=True)
    if listed.returncode != 0:  # a configuration pip cannot read: leave it to pip
        logger.warning("pip config list failed: pip installs")
        return False
    settings = pip_settings(listed.stdout.splitlines())
    unknown = unknown_options(settings)
    if unknown:
        logger.info("pip's configuration sets %s, which uv is not told: pip installs", unknown)
        return False
    env = dict(os.environ)
    if "cert" in settings:
        env.setdefault("SSL_CERT_FILE", settings["cert"])
    has_uv = importlib.util.find_spec("uv") is not None
    if not has_uv and subprocess.run([*pip, "install", "--quiet", "uv"], env=env).returncode:
        return False
    uv = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable]
    if subprocess.run([*uv, *uv_arguments(settings), *argv], env=env).returncode == 0:
        return True
    logger.warning("uv could not install %s: pip tries", " ".join(argv))
    return False


def project_dependencies(pyproject: dict, spec: str) -> list[str]:
    """The requirements `pip install SPEC` would install for the project itself (SPEC: `.`,
    or `.[extra,...]`): its dependencies and those of the extras, following an extra that
    names the project with extras of its own (`docsim[ray]`)."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    found = list(project.get("dependencies", []))
    extras, seen = _extras(spec), set()
    while extras:
        extra = extras.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in optional[extra]:
            if requirement.startswith(f"{project['name']}["):  # the project, with extras
                extras += _extras(requirement)
            else:
                found.append(requirement)
    return list(dict.fromkeys(found))


def _extras(spec: str) -> list[str]:
    """`.[cpu, dev]` -> ["cpu", "dev"]."""
    listed = spec.partition("[")[2].partition("]")[0]
    return [extra.strip() for extra in listed.split(",") if extra.strip()]


def install(argv: Sequence[str]) -> int:
    pip = [sys.executable, "-m", "pip"]
    if uv_install(argv, pip):
        return 0
    return subprocess.run([*pip, "install", "--quiet", "--no-compile", *argv]).returncode


def main(argv: Sequence[str]) -> int:
    """`install.py ARGS`: `pip install ARGS`. `install.py --dependencies-of SPEC`: the
    requirements of the project in this folder (`.[cpu,dev]`), without the project."""
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if argv[:1] == ["--dependencies-of"]:
        import tomllib

        with open("pyproject.toml", "rb") as file:
            return install(project_dependencies(tomllib.load(file), argv[1]))
    return install(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
