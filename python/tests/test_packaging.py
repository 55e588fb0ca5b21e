# SPDX-License-Identifier: LGPL-2.1-or-later
"""`pip install ./python` works from a checkout (offline: Debian's
setuptools, no build isolation), and installs an importable package."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(HERE)


def test_pip_installs_an_importable_package(tmp_path):
    # Looked up, not imported: setuptools replaces distutils when imported.
    for needed in ("pip", "setuptools"):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"no {needed} here (python3-pip, python3-setuptools)")
    src = tmp_path / "src"
    # A copy: the build leaves build/ and *.egg-info where it runs.
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                 "*.egg-info"))
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                          "--no-deps", "--no-index", "--target", str(target), str(src)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", "import gpuslot; print(gpuslot.__file__); "
                          "print(gpuslot.__version__)"],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    where, version = out.stdout.split()
    assert where.startswith(str(target))
    assert version == "1.3.0"
    assert (target / "gpuslot" / "aio.py").exists()
