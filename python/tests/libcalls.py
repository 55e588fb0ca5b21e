# SPDX-License-Identifier: LGPL-2.1-or-later
"""A client's library seen through a wrapper, for tests that check which
calls a client makes."""

import time


class CountingLib:
    """The client's library (``client._lib``), counting the calls made
    through it by name; a call named in ``delays`` first sleeps that many
    seconds (a try that builds a new layout's streams may take that
    long)."""

    def __init__(self, lib, delays=None):
        self._lib, self._delays, self.calls = lib, dict(delays or {}), []

    def __getattr__(self, name):
        fn = getattr(self._lib, name)
        if not name.startswith("gpuslot_"):
            return fn

        def counted(*args):
            self.calls.append(name)
            if name in self._delays:
                time.sleep(self._delays[name])
            return fn(*args)
        return counted
