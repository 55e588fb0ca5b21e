# SPDX-License-Identifier: LGPL-2.1-or-later
"""What a failed gpuslot call raises: an OSError with the errno and
libgpuslot's explanation of what went wrong and what to do."""

import errno as _errno

from . import _native


class GpuslotError(OSError):
    """A libgpuslot call failed: ``.errno`` is the errno, ``.strerror`` the
    library's message (who holds the queue budget, which slots exist, ...)."""


class SlotTimeout(GpuslotError, TimeoutError):
    """No slot within the timeout (ETIMEDOUT), or none free for a try
    (EAGAIN)."""


class SlotInterrupted(GpuslotError, InterruptedError):
    """A signal ended the wait (EINTR); nothing is held."""


class ClientClosed(GpuslotError):
    """The client was closed: a call after close() (EBADF), or an acquire
    whose wait close() ended (ECANCELED: it left the queue, nothing is
    held)."""


class NotPermitted(GpuslotError, PermissionError):
    """Not for this caller (EACCES, EPERM): e.g. a debug table, which only
    root (the module) or an admin (the socket) may read."""


_BY_ERRNO = {
    _errno.EACCES: NotPermitted,
    _errno.EPERM: NotPermitted,
    _errno.ETIMEDOUT: SlotTimeout,
    _errno.EAGAIN: SlotTimeout,
    _errno.EINTR: SlotInterrupted,
}


def check(result, what):
    """``result`` of a libgpuslot call (0 or more, or -errno): raise the
    matching error with the calling thread's explanation when negative."""
    if result >= 0:
        return result
    code = -result
    message = _native.last_error() or f"gpuslot: {what}: {_errno.errorcode.get(code, code)}"
    raise _BY_ERRNO.get(code, GpuslotError)(code, message)
