"""Themes ship with the package (themes/ stays at the repository root; setup.py maps it to
`specmon.themes`): a wheel and an editable install, each in a fresh venv and run from
outside the source tree, find every theme, and NO_COLOR selects monochrome."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
THEMES = {p.stem for p in (REPO / "themes").glob("*.toml")}  # dark, light, monochrome
# Printed by the installed package: where its themes live, every name, and the NO_COLOR pick.
PROBE = (
    "import os, specmon.tui.themes as t; names = [x.name for x in t.load_themes((t.THEME_DIR,))];"
    "print(t.__file__); print(t.THEME_DIR); print(','.join(sorted(names)));"
    "print(t.resolve_theme('light', names, no_color='NO_COLOR' in os.environ))"
)


def _source_copy(tmp: Path) -> Path:
    """What a clean checkout builds from, away from the worktree (no build/ or egg-info there)."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "specmon", src / "specmon", ignore=ignore)
    shutil.copytree(REPO / "themes", src / "themes")
    return src


def _fresh_venv(path: Path) -> Path:
    """A new venv whose own site-packages comes first; the test interpreter's packages
    (textual, setuptools, ...) come after it through a .pth line, so nothing is downloaded."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def _pip(python: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "--no-input", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _probe(python: Path, cwd: Path, no_color: bool) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NO_COLOR")}
    if no_color:
        env["NO_COLOR"] = "1"
    proc = subprocess.run(
        [str(python), "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.splitlines()


def test_wheel_in_a_fresh_venv_finds_every_theme(tmp_path):
    assert {"dark", "light", "monochrome"} <= THEMES
    src = _source_copy(tmp_path)
    wheels = tmp_path / "wheels"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = wheels.glob("specmon-*.whl")
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "install", "--no-deps", "--force-reinstall", str(wheel))
    shutil.rmtree(src)  # the installed package must not need the source tree
    module, theme_dir, names, pick = _probe(python, tmp_path, no_color=False)
    venv = str(tmp_path / "venv")
    assert module.startswith(venv) and theme_dir.startswith(venv)
    assert Path(theme_dir).name == "themes" and Path(theme_dir).parent.name == "specmon"
    assert names.split(",") == sorted(f"specmon-{stem}" for stem in THEMES)
    assert pick == "specmon-light"
    assert _probe(python, tmp_path, no_color=True)[3] == "specmon-monochrome"


def test_editable_install_finds_every_theme(tmp_path):
    src = _source_copy(tmp_path)
    python = _fresh_venv(tmp_path / "venv")
    _pip(python, "install", "--no-deps", "--no-build-isolation", "-e", str(src))
    module, theme_dir, names, pick = _probe(python, tmp_path, no_color=False)
    assert module == str(src / "specmon" / "tui" / "themes.py")
    assert theme_dir == str(src / "themes")
    assert names.split(",") == sorted(f"specmon-{stem}" for stem in THEMES)
    assert pick == "specmon-light"
    assert _probe(python, tmp_path, no_color=True)[3] == "specmon-monochrome"
