// SPDX-License-Identifier: GPL-2.0
/*
 * libgpuslot's ABI from a C caller: structs of the first published size
 * (the *_SIZE_VER0 literals) are accepted, smaller ones refused, bigger
 * ones (a newer header) accepted when the tail the library does not know
 * is zero and refused with E2BIG otherwise; the library's version is the
 * header's. No device is needed: every call here fails after the checks
 * it tests, at the missing device.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <gpuslot.h>

static int failures;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "abi_test:%d: %s (last error: %s)\n", __LINE__, \
				#cond, gpuslot_last_error());                          \
			failures++;                                                   \
		}                                                                     \
	} while (0)

struct newer_options {
	struct gpuslot_options o;
	unsigned long long added_later;
};

int main(void)
{
	struct gpuslot_client *c = NULL;
	struct newer_options n;
	struct gpuslot_slot s;

	CHECK(gpuslot_lib_version() == GPUSLOT_VERSION_NUMBER(GPUSLOT_VERSION_MAJOR,
							  GPUSLOT_VERSION_MINOR,
							  GPUSLOT_VERSION_PATCH));
	CHECK(GPUSLOT_OPTIONS_SIZE_VER0 == 80 && GPUSLOT_SLOT_SIZE_VER0 == 72 &&
	      GPUSLOT_LAYOUT_INFO_SIZE_VER0 == 88);

	memset(&n, 0, sizeof(n));
	n.o.device = "/nonexistent/gpuslot";
	n.o.backend = GPUSLOT_BACKEND_NONE;

	n.o.size = GPUSLOT_OPTIONS_SIZE_VER0 - 1;
	CHECK(gpuslot_open(&n.o, &c) == -EINVAL);
	CHECK(strstr(gpuslot_last_error(), "set it to sizeof(struct gpuslot_options)"));
	/* Past the checks, at the device. */
	n.o.size = GPUSLOT_OPTIONS_SIZE_VER0;
	CHECK(gpuslot_open(&n.o, &c) == -ENOENT);
	n.o.size = sizeof(n);
	CHECK(gpuslot_open(&n.o, &c) == -ENOENT);
	n.added_later = 1;
	CHECK(gpuslot_open(&n.o, &c) == -E2BIG);
	n.added_later = 0;
	n.o.__reserved[3] = 1;
	CHECK(gpuslot_open(&n.o, &c) == -EINVAL);
	n.o.__reserved[3] = 0;
	n.o.flags = 1u << 7;
	CHECK(gpuslot_open(&n.o, &c) == -EINVAL);
	CHECK(c == NULL);

	memset(&s, 0, sizeof(s));
	s.size = GPUSLOT_SLOT_SIZE_VER0;
	CHECK(gpuslot_acquire_slot(NULL, 0, 0, &s) == -EINVAL);
	CHECK(gpuslot_release_slot(NULL, &s, 0) == -EINVAL);
	CHECK(gpuslot_acquire_fd(&s) == -EINVAL);
	CHECK(gpuslot_refresh(NULL) == -EINVAL);
	gpuslot_close(NULL);

	if (failures)
		return 1;
	printf("abi_test: ok\n");
	return 0;
}
