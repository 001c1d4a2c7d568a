"""Deploy the project to Scrapyd, failing loudly: ``python -m crawlproject.deploy``.

``scrapyd-deploy`` (scrapyd-client 2.0.3) exits 0 when Scrapyd refuses an egg
(its answer is HTTP 200 with ``"status": "error"``), and Scrapyd keeps the
refused egg as the project's latest version, so the next ``schedule.json`` runs
it. This command builds the egg the same way (``setup.py bdist_egg``, in a
temporary directory: the checkout is left untouched), checks it holds every
module and ``.lua`` file of the project, uploads it to ``addversion.json``,
then requires ``listspiders.json`` of that very version to name the spider(s)
(``web`` by default). On any failure it prints why, removes the version it
uploaded (``delversion.json``) unless ``--keep-broken``, and exits 1::

    python -m crawlproject.deploy                      # the [deploy] target of scrapy.cfg
    python -m crawlproject.deploy prod                 # its [deploy:prod] target
    python -m crawlproject.deploy --url http://10.0.0.5:6800/ --version 42
    python -m crawlproject.deploy --build-egg out.egg  # only build and check the egg

Targets are read as scrapyd-deploy reads them: ``[deploy]`` holds defaults,
``[deploy:NAME]`` overrides them; keys ``url``, ``project``, ``version``,
``username``, ``password``. Exit status: 0 deployed, 1 failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urljoin
from urllib.request import Request, urlopen

DEFAULT_SPIDERS = ("web",)
PROJECT_PACKAGES = ("crawlproject", "spiders", "middlewares", "pipelines")
# Files that must travel in the egg: modules and the Lua scripts loaded with
# importlib.resources (crawlproject/frontier/store/lua, crawlproject/dedupe/lua).
SHIPPED_SUFFIXES = (".py", ".lua")


class DeployError(Exception):
    """A failure with a message meant for the person deploying."""


def find_scrapy_cfg(start: Path) -> Path:
    """The closest scrapy.cfg at or above ``start`` (as scrapy and scrapyd-deploy look)."""
    for folder in (start, *start.parents):
        if (folder / "scrapy.cfg").is_file():
            return folder / "scrapy.cfg"
    raise DeployError(f"no scrapy.cfg in {start} or above: run this inside the project")


def read_targets(cfg_path: Path) -> dict[str, dict[str, str]]:
    """Deploy targets by name: ``[deploy]`` is ``default`` and the base of ``[deploy:NAME]``."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(cfg_path)
    base = dict(parser.items("deploy")) if parser.has_section("deploy") else {}
    targets = {"default": base} if base else {}
    for section in parser.sections():
        if section.startswith("deploy:"):
            targets[section.split(":", 1)[1]] = {**base, **dict(parser.items(section))}
    return targets


def build_egg(root: Path, out_dir: Path) -> Path:
    """``setup.py bdist_egg`` with every build product under ``out_dir``; the egg's path."""
    if not (root / "setup.py").is_file():
        # scrapyd-deploy would write a find_packages() setup.py here, which leaves
        # out namespace packages and the .lua files: refuse instead.
        raise DeployError(f"{root / 'setup.py'} is missing: the egg is built from it")
    cmd = [
        sys.executable, "setup.py", "--quiet",
        "egg_info", "--egg-base", str(out_dir),
        "build", "--build-base", str(out_dir / "build"),
        "bdist_egg", "--dist-dir", str(out_dir / "dist"), "--bdist-dir", str(out_dir / "bdist"),
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
    eggs = sorted((out_dir / "dist").glob("*.egg"))
    if proc.returncode != 0 or len(eggs) != 1:
        output = (proc.stdout + proc.stderr).strip()[-3000:]
        raise DeployError(f"building the egg failed (exit {proc.returncode}):\n{output}")
    return eggs[0]


def check_egg(egg: Path, root: Path, packages: Sequence[str] = PROJECT_PACKAGES) -> list[str]:
    """Problems with the egg: project files it lacks, package folders Python
    cannot import from a zip (no ``__init__.py``), no Scrapy settings entry point."""
    with zipfile.ZipFile(egg) as archive:
        names = set(archive.namelist())
        entry_points = (
            archive.read("EGG-INFO/entry_points.txt").decode()
            if "EGG-INFO/entry_points.txt" in names
            else ""
        )
    problems: list[str] = []
    for package in packages:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                name = path.relative_to(root).as_posix()
                if name not in names:
                    problems.append(f"missing from the egg: {name}")
    module_dirs = {str(PurePosixPath(n).parent) for n in names if n.endswith(".py")}
    for folder in sorted(module_dirs - {"."}):
        if f"{folder}/__init__.py" not in names:
            problems.append(f"{folder}/ has modules but no __init__.py: not importable from a zip")
    if "[scrapy]" not in entry_points or "settings" not in entry_points:
        problems.append("EGG-INFO/entry_points.txt has no [scrapy] settings entry point")
    return problems


def _multipart(
    fields: Mapping[str, str], files: Mapping[str, tuple[str, bytes]]
) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type (what Scrapyd's addversion wants)."""
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
            + value.encode()
            + b"\r\n"
        )
    for name, (filename, data) in files.items():
        head = (
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        parts.append(head.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class ScrapydApi:
    """The few Scrapyd JSON endpoints deploying needs, over urllib."""

    def __init__(
        self, url: str, username: str = "", password: str = "", timeout: float = 120.0
    ) -> None:
        self.url = url if url.endswith("/") else url + "/"
        self.timeout = timeout
        self.headers: dict[str, str] = {}
        if username:
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"

    def call(
        self,
        endpoint: str,
        query: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str = "application/x-www-form-urlencoded",
    ) -> dict[str, Any]:
        """GET (or POST ``body``) one endpoint; its JSON answer, whatever its status."""
        url = urljoin(self.url, endpoint) + (f"?{urlencode(query)}" if query else "")
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            with urlopen(Request(url, data=body, headers=headers), timeout=self.timeout) as resp:
                raw = resp.read()
        except HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise DeployError(f"{url}: HTTP {exc.code} {exc.reason}\n{detail}") from exc
        except (URLError, OSError) as exc:
            raise DeployError(f"{url}: cannot reach Scrapyd: {exc}") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise DeployError(f"{url}: not a JSON answer: {raw[:500]!r}") from exc
        if not isinstance(answer, dict):
            raise DeployError(f"{url}: unexpected answer {answer!r}")
        return answer

    def post_form(self, endpoint: str, fields: Mapping[str, str]) -> dict[str, Any]:
        return self.call(endpoint, body=urlencode(fields).encode())

    def add_version(self, project: str, version: str, egg: bytes) -> dict[str, Any]:
        body, content_type = _multipart(
            {"project": project, "version": version}, {"egg": ("project.egg", egg)}
        )
        return self.call("addversion.json", body=body, content_type=content_type)


def _failed(answer: Mapping[str, Any], what: str) -> DeployError:
    message = str(answer.get("message", "")).strip() or json.dumps(answer)
    return DeployError(f"Scrapyd refused {what}:\n{message}")


def deploy(
    api: ScrapydApi,
    project: str,
    version: str,
    egg: bytes,
    spiders: Sequence[str],
    keep_broken: bool,
) -> list[str]:
    """Upload the egg and check its spiders; the spider names. Raises DeployError."""
    answer = api.add_version(project, version, egg)
    try:
        if answer.get("status") != "ok":
            raise _failed(answer, f"the egg (addversion.json, project {project} version {version})")
        listed = api.call("listspiders.json", {"project": project, "_version": version})
        if listed.get("status") != "ok":
            raise _failed(listed, f"to list the spiders of {project} version {version}")
        names = [str(s) for s in listed.get("spiders", [])]
        missing = [s for s in spiders if s not in names]
        if missing:
            raise DeployError(
                f"version {version} of {project} lacks spider(s) {missing}; it has {names}"
            )
        return names
    except DeployError as exc:
        # Scrapyd stored the egg even though it refused it: as the latest
        # version, the next schedule.json would run it.
        if keep_broken:
            raise DeployError(
                f"{exc}\n(version {version} left on the server: --keep-broken)"
            ) from exc
        try:
            api.post_form("delversion.json", {"project": project, "version": version})
        except DeployError as cleanup:
            raise DeployError(f"{exc}\nremoving version {version} failed too: {cleanup}") from exc
        raise DeployError(f"{exc}\n(version {version} removed from the server again)") from exc


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m crawlproject.deploy",
        description="Build the project's egg and deploy it to Scrapyd; exit 1 if Scrapyd "
        "refuses it or cannot list its spiders.",
    )
    parser.add_argument(
        "target", nargs="?", default="default", help="a scrapy.cfg [deploy:NAME] target"
    )
    parser.add_argument("--url", help="Scrapyd's URL (instead of the target's url)")
    parser.add_argument("-p", "--project", help="Scrapyd project name (default: the target's)")
    parser.add_argument("-v", "--version", help="version to deploy (default: a Unix timestamp)")
    parser.add_argument(
        "--spider",
        action="append",
        help="a spider the deployed version must list (repeatable; default: web)",
    )
    parser.add_argument("--egg", type=Path, help="deploy this egg instead of building one")
    parser.add_argument(
        "--build-egg", type=Path, metavar="FILE", help="only build and check the egg, into FILE"
    )
    parser.add_argument(
        "--keep-broken", action="store_true", help="leave a refused version on the server"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="HTTP timeout, seconds")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> str:
    """Do what the arguments ask; a one-line summary. Raises DeployError."""
    cfg = find_scrapy_cfg(Path.cwd())
    root = cfg.parent
    targets = read_targets(cfg)
    if args.build_egg is None and args.url is None and args.target not in targets:
        known = ", ".join(sorted(targets)) or "none"
        raise DeployError(f"unknown target {args.target!r} in {cfg} (targets: {known})")
    target = targets.get(args.target, {})
    with tempfile.TemporaryDirectory(prefix="crawlproject-egg-") as tmp:
        if args.egg is not None:
            egg_path = args.egg
        else:
            print(f"Building the egg from {root}", file=sys.stderr)
            egg_path = build_egg(root, Path(tmp))
            problems = check_egg(egg_path, root)
            if problems:
                raise DeployError("the egg is incomplete:\n  " + "\n  ".join(problems))
        if args.build_egg is not None:
            shutil.copyfile(egg_path, args.build_egg)
            return f"egg written to {args.build_egg}"
        egg = egg_path.read_bytes()
    url = args.url or target.get("url")
    project = args.project or target.get("project")
    if not url or not project:
        raise DeployError(f"target {args.target!r} needs a url and a project (or --url/--project)")
    version = args.version or target.get("version") or str(int(time.time()))
    if version in ("GIT", "HG"):
        raise DeployError(f"version = {version} is not supported here: pass --version")
    api = ScrapydApi(url, target.get("username", ""), target.get("password", ""), args.timeout)
    print(f"Deploying {project} version {version} to {api.url}", file=sys.stderr)
    names = deploy(api, project, version, egg, args.spider or DEFAULT_SPIDERS, args.keep_broken)
    return f"deployed {project} version {version} to {api.url}: spiders {', '.join(names)}"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        print(run(args))
    except DeployError as exc:
        print(f"Deploy FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
