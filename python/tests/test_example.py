# SPDX-License-Identifier: LGPL-2.1-or-later
"""The README's Python example is examples/job_loop.py, and it runs."""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "job_loop.py")
README = os.path.join(HERE, "..", "..", "README.md")


def test_the_readme_shows_the_example_as_it_is():
    if not os.path.exists(README):
        import pytest
        pytest.skip("no README.md beside this package (an installed copy)")
    blocks = re.findall(r"```python\n(.*?)```", open(README).read(), re.S)
    assert open(EXAMPLE).read() in blocks


def test_the_example_runs(lock):
    out = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, GPUSLOT_BACKEND="none"))
    assert out.returncode == 0, out.stderr
    m = re.fullmatch(r"(\d+) frames done, (\d+) skipped on none\n", out.stdout)
    assert m, out.stdout
    assert int(m.group(1)) + int(m.group(2)) == 100
    assert int(m.group(1)) >= 50
