# SPDX-License-Identifier: LGPL-2.1-or-later
"""close() while other threads (or tasks) still wait for a slot or hold one.

The rule (docs/python.md): close() wakes every acquire waiting on the
client, which leaves the domain's queue and raises ClientClosed (errno
ECANCELED); it waits for the client's other calls in progress to return;
then it ends the client's holds and marks their Slot objects released.
Nothing is freed under a running call.

Each case runs in a child process, so that a crash (the use-after-free of
issue 28) fails the test instead of killing pytest.
"""

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time


class Child:
    """A python3 running @code with this session's lock in its environment;
    it prints what it did, and waits for "go" lines on its stdin."""

    def __init__(self, code):
        self.proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
        self.pid = self.proc.pid
        self.lines = []

    def expect(self, line):
        got = self.proc.stdout.readline().strip()
        self.lines.append(got)
        assert got == line, f"child said {got!r}, not {line!r}:\n{self.finish()[1]}"

    def go(self):
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self):
        """Its exit status and everything it printed."""
        # Not communicate(): it reads the pipe past what expect()'s
        # readline() buffered already. What a child prints fits the pipe.
        self.proc.stdin.close()
        note = ""
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            note = "\n[killed: still running after 60 s]"
        out = self.proc.stdout.read()
        return self.proc.returncode, "\n".join(self.lines) + "\n" + out + note

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_for(predicate, timeout=20):
    """Wait for a state (not for a duration): True once @predicate holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def queued(client, pid):
    return [w for w in client.status().waiters if w.pid == pid]


def holding(client, pid):
    return [h for h in client.status().holders if h.pid == pid]


def test_close_wakes_a_thread_blocked_in_acquire_which_leaves_the_queue(client):
    # This client holds the slot (k = 1): the child's acquire waits.
    held = client.acquire()
    c = Child("""
        import errno, sys, threading, gpuslot
        c = gpuslot.Client(backend="none")
        result = []
        def wait():
            try:
                result.append(c.acquire())
            except BaseException as e:
                result.append(e)
        t = threading.Thread(target=wait)
        t.start()
        print("waiting", flush=True)
        sys.stdin.readline()
        c.close()
        print("closed", flush=True)
        t.join(20)
        if t.is_alive():
            print("still blocked after close", flush=True)
            sys.stdin.readline()   # the parent released: the waiter gets a grant
            t.join(20)
        r = result[0] if result else None
        print("result", type(r).__name__, errno.errorcode.get(getattr(r, "errno", None)),
              "|", r, flush=True)
    """)
    try:
        c.expect("waiting")
        assert wait_for(lambda: queued(client, c.pid)), "the child's acquire never queued"
        c.go()
        c.expect("closed")
        # The waiter leaves the domain's queue with the close.
        left = wait_for(lambda: not queued(client, c.pid), timeout=10)
        held.release()
        c.go()
        code, out = c.finish()
    finally:
        c.kill()
    assert code == 0, f"the child died (status {code}):\n{out}"
    assert left, f"the closed client's waiter stayed queued:\n{out}"
    assert "result ClientClosed ECANCELED | " in out, out
    assert "closed while" in out, out
    assert holding(client, c.pid) == [] and queued(client, c.pid) == []


def test_close_from_a_signal_handler_of_the_waiting_thread_itself(client):
    # close() cannot wait for a call of its own thread: the wait ends with
    # ClientClosed and the close is finished as that call returns.
    held = client.acquire()
    c = Child("""
        import errno, signal, sys, gpuslot
        c = gpuslot.Client(backend="none")
        signal.signal(signal.SIGUSR1, lambda *_: c.close())
        print("waiting", flush=True)
        try:
            c.acquire(timeout=30)
            print("granted", flush=True)
        except gpuslot.GpuslotError as e:
            print("result", type(e).__name__, errno.errorcode.get(e.errno), flush=True)
        print("closed", repr(c), flush=True)
    """)
    try:
        c.expect("waiting")
        assert wait_for(lambda: queued(client, c.pid)), "the child's acquire never queued"
        c.proc.send_signal(signal.SIGUSR1)
        left = wait_for(lambda: not queued(client, c.pid), timeout=10)
        held.release()
        code, out = c.finish()
    finally:
        c.kill()
    assert code == 0, f"the child died (status {code}):\n{out}"
    assert left, f"the closed client's waiter stayed queued:\n{out}"
    assert "result ClientClosed ECANCELED" in out, out
    assert "closed <gpuslot.Client domain 0 closed>" in out, out


def test_close_ends_the_holds_and_their_slots_say_so(client):
    c = Child("""
        import errno, gpuslot
        c = gpuslot.Client(backend="none")
        slot = c.acquire()
        print("holding", slot.held, flush=True)
        c.close()
        print("after close", slot.held, flush=True)
        with slot:
            pass                      # leaving the with of a closed slot: nothing to do
        try:
            slot.release()
        except gpuslot.ClientClosed as e:
            print("release", errno.errorcode.get(e.errno), "|", e, flush=True)
        try:
            c.acquire(timeout=0)
        except gpuslot.ClientClosed as e:
            print("acquire", errno.errorcode.get(e.errno), flush=True)
    """)
    try:
        code, out = c.finish()
    finally:
        c.kill()
    assert code == 0, f"the child died (status {code}):\n{out}"
    assert "holding True" in out and "after close False" in out, out
    assert "release EBADF | " in out and "when its client was closed" in out, out
    assert "acquire EBADF" in out, out
    # Its hold ended with the close: the slot is free.
    with client.acquire(timeout=0) as slot:
        assert slot.held


def test_async_close_wakes_the_waiting_tasks_which_leave_the_queue(client):
    held = client.acquire()
    c = Child("""
        import asyncio, errno, sys, gpuslot
        async def main():
            client = gpuslot.AsyncClient(backend="none")
            tasks = [asyncio.create_task(client.acquire()) for _ in range(3)]
            tasks.append(asyncio.create_task(client.acquire(timeout=30)))
            await asyncio.sleep(0)
            print("waiting", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            client.close()
            for t in tasks:
                try:
                    await asyncio.wait_for(t, 20)
                    print("granted", flush=True)
                except gpuslot.GpuslotError as e:
                    print("result", type(e).__name__, errno.errorcode.get(e.errno), flush=True)
        asyncio.run(main())
        print("done", flush=True)
    """)
    try:
        c.expect("waiting")
        assert wait_for(lambda: len(queued(client, c.pid)) == 4), "the tasks never queued"
        c.go()
        left = wait_for(lambda: not queued(client, c.pid), timeout=10)
        held.release()
        code, out = c.finish()
    finally:
        c.kill()
    assert code == 0, f"the child died (status {code}):\n{out}"
    assert left, f"the closed client's waiters stayed queued:\n{out}"
    assert out.count("result ClientClosed ECANCELED") == 4, out
    assert "done" in out, out
    assert holding(client, c.pid) == []


def test_close_amid_threads_that_acquire_and_release_in_a_loop(client):
    # Whatever each thread is doing when close() comes (waiting, holding,
    # releasing, between calls), it ends with ClientClosed and the process
    # with nothing held or queued. Several rounds, for the interleavings.
    c = Child("""
        import collections, threading, time, gpuslot
        ends = collections.Counter()
        for round in range(5):
            c = gpuslot.Client(backend="none")
            started = threading.Barrier(9)
            def work():
                started.wait()
                try:
                    while True:
                        with c.acquire(timeout=5) as slot:
                            time.sleep(0.0002)
                except gpuslot.ClientClosed as e:
                    ends[e.errno] += 1
                except BaseException as e:
                    ends[repr(e)] += 1
            threads = [threading.Thread(target=work) for _ in range(8)]
            for t in threads:
                t.start()
            started.wait()
            time.sleep(0.05 * (round + 1))
            c.close()
            for t in threads:
                t.join(20)
            print("alive", sum(t.is_alive() for t in threads), flush=True)
        print("ends", dict(ends), flush=True)
    """)
    try:
        code, out = c.finish()
    finally:
        c.kill()
    assert code == 0, f"the child died (status {code}):\n{out}"
    assert out.count("alive 0") == 5, out
    ends = eval(out.split("ends ", 1)[1])  # noqa: S307 - our child's own dict
    assert set(ends) <= {errno.EBADF, errno.ECANCELED}, out
    assert sum(ends.values()) == 40, out
    assert holding(client, c.pid) == [] and queued(client, c.pid) == []
