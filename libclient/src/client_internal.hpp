// SPDX-License-Identifier: LGPL-2.1-or-later
// gpuslot_open() with a chosen backend, for tests that put a test double
// of a GPU runtime behind a real client. Not exported from libgpuslot.so.
#pragma once

#include "gpuslot.h"
#include "process_domain.hpp"

namespace gpuslot {

// As gpuslot_open(); @backends (nullptr: the real ones) makes the backend.
// A client with its own backends shares no streams with other clients.
int open_client(const gpuslot_options *opts, const BackendFactory *backends,
		gpuslot_client **out);

} // namespace gpuslot
