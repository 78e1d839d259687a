"""The built wheel is complete: it holds the package data (UI templates and static files, prompts, migrations,
schemas) and, installed into a fresh virtual environment, serves the portal's pages from there. An editable
install hides a missing package-data glob (the files are read from the checkout), so only a real wheel shows it.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from testsupport import free_port, stop_process, wait_port

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel`` of the checkout (no dependencies; the build backend pyproject.toml names, in an isolated
    build environment, as ``python -m build`` would)."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        timeout=600,
    )
    [whl] = out.glob("ragpulse-*.whl")
    return whl


def test_the_wheel_holds_the_package_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for d in ("templates", "static"):
        on_disk = {p.name for p in (REPO / "src/ragpulse/portal/ui" / d).iterdir() if p.is_file()}
        packed = {n.rsplit("/", 1)[1] for n in names if n.startswith(f"ragpulse/portal/ui/{d}/")}
        assert on_disk
        assert packed == on_disk
    for pattern_dir, suffix in (
        ("judges/prompts", ".txt"),
        ("store/migrations", ".sql"),
    ):
        on_disk = {p.name for p in (REPO / "src/ragpulse" / pattern_dir).glob(f"*{suffix}")}
        packed = {n.rsplit("/", 1)[1] for n in names if n.startswith(f"ragpulse/{pattern_dir}/")}
        assert on_disk
        assert packed == on_disk
    assert {"ragpulse/ingest/trace_event.schema.json", "ragpulse/py.typed"} <= names


@pytest.fixture
def installed(wheel: Path, tmp_path: Path) -> Iterator[Path]:
    """A fresh virtual environment with the wheel installed (its dependencies are taken from this
    interpreter's site-packages through ``PYTHONPATH``, which holds no ``ragpulse`` package of its own: the
    development install is editable)."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    yield py


def test_the_installed_wheel_serves_the_portal(installed: Path, pg_url: str, tmp_path: Path) -> None:
    deps = os.pathsep.join(site.getsitepackages())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGPULSE_", "OTEL_", "OPENAI_"))}
    env["PYTHONPATH"] = deps
    where = subprocess.run(
        [str(installed), "-c", "import ragpulse; print(ragpulse.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(installed.parents[1])), where  # the wheel's copy, not the checkout's
    api_port, http_port = free_port(), free_port()
    env.update(
        {
            "RAGPULSE_STORE_DATABASE_URL": pg_url,
            "RAGPULSE_API_ADDRESS": f"127.0.0.1:{api_port}",
            "RAGPULSE_HTTP_ADDRESS": f"127.0.0.1:{http_port}",
            "RAGPULSE_OTLP_GRPC_ADDRESS": "",
            "RAGPULSE_OTLP_HTTP_ADDRESS": "",
        }
    )
    proc = subprocess.Popen(
        [str(installed), "-m", "ragpulse", "serve"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(api_port, proc, "the portal of the installed wheel", timeout=90.0)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}", timeout=30.0, follow_redirects=True
        ) as client:
            page = client.get("/")
            assert page.status_code == 200
            assert "text/html" in page.headers["content-type"]
            assert "/static/portal.css" in page.text
            css = client.get("/static/portal.css")
            assert css.status_code == 200
            assert css.content == (REPO / "src/ragpulse/portal/ui/static/portal.css").read_bytes()
            assert client.get("/static/htmx.min.js").status_code == 200
    finally:
        stop_process(proc)
