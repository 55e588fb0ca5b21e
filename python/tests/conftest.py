# SPDX-License-Identifier: LGPL-2.1-or-later
"""Where the tests find a gpuslot lock.

With /dev/gpuslot (the module, as in the test VM) the tests use it.
Without it, a gpuslotd serves the bundled Radeon VII topology on its
socket transport in a fresh directory for the session
(GPUSLOT_TEST_GPUSLOTD, GPUSLOT_TEST_TOPOLOGY), and the clients reach it
through GPUSLOT_TRANSPORT=socket. An admin's k goes through gpuslotctl
(GPUSLOT_TEST_GPUSLOTCTL) on either.

The closing line "N passed, N failed" is for `make test`'s summary.
"""

import os
import shutil
import subprocess
import tempfile
import time

import pytest

import gpuslot

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


class Lock:
    """The lock under test and an admin's hands on it."""

    def __init__(self, transport, ctl, env):
        self.transport = transport
        self.ctl = ctl
        self.env = env

    def gpuslotctl(self, *args):
        out = subprocess.run([self.ctl, *args, "--transport", self.transport], env=self.env,
                             capture_output=True, text=True, timeout=30)
        if out.returncode:
            raise AssertionError(f"gpuslotctl {' '.join(args)}: {out.stderr or out.stdout}")
        return out.stdout

    def set_k(self, k):
        with gpuslot.Client(backend="none") as c:
            before = c.status()
            if before.k == k:
                return
            self.gpuslotctl("set-k", str(k))
            # gpuslotd may re-plan after the admin's k: wait until it did.
            deadline = time.monotonic() + 10
            while True:
                now = c.status()
                if now.k == k and now.generation != before.generation:
                    time.sleep(0.05)
                    if c.status().generation == now.generation:
                        return
                if time.monotonic() > deadline:
                    raise AssertionError(f"k did not become {k}: {now}")
                time.sleep(0.02)


def _start_gpuslotd(tmp):
    gpuslotd = os.environ.get("GPUSLOT_TEST_GPUSLOTD") or shutil.which("gpuslotd")
    topology = os.environ.get("GPUSLOT_TEST_TOPOLOGY") or os.path.join(
        REPO, "tests/fixtures/kfd/radeon-vii-gfx906")
    if not gpuslotd:
        pytest.exit("no /dev/gpuslot and no gpuslotd to serve the socket transport: set "
                    "GPUSLOT_TEST_GPUSLOTD", returncode=2)
    log = open(os.path.join(tmp, "gpuslotd.log"), "w")
    proc = subprocess.Popen([gpuslotd, "--transport", "socket", "--socket-dir", tmp,
                             "--state-dir", tmp, "--topology", topology, "--dri", "",
                             "--config", os.path.join(tmp, "none.conf")],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(tmp, "gpu0.sock")):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.exit(f"gpuslotd did not start; its log:\n{open(log.name).read()}",
                        returncode=2)
        time.sleep(0.05)
    return proc


@pytest.fixture(scope="session")
def lock():
    ctl = os.environ.get("GPUSLOT_TEST_GPUSLOTCTL") or shutil.which("gpuslotctl")
    if os.path.exists("/dev/gpuslot") and os.environ.get("GPUSLOT_TRANSPORT") != "socket":
        os.environ["GPUSLOT_TRANSPORT"] = "device"
        yield Lock("device", ctl, dict(os.environ))
        return
    with tempfile.TemporaryDirectory(prefix="gpuslot-pytest-") as tmp:
        os.chmod(tmp, 0o755)
        proc = _start_gpuslotd(tmp)
        os.environ["GPUSLOT_TRANSPORT"] = "socket"
        os.environ["GPUSLOT_SOCKET_DIR"] = tmp
        try:
            yield Lock("socket", ctl, dict(os.environ))
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.fixture
def k(lock):
    """set k for the test (k(2)); k is 1 again afterwards."""
    yield lock.set_k
    lock.set_k(1)


@pytest.fixture
def client(lock):
    with gpuslot.Client(backend="none") as c:
        yield c


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    skipped = len(stats.get("skipped", []))
    terminalreporter.write_line(f"python: {skipped} skipped")
    terminalreporter.write_line(f"{passed} passed, {failed} failed")
