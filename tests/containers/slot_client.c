// SPDX-License-Identifier: GPL-2.0
/*
 * A libgpuslot client for the containers-and-metrics tests: it runs in a
 * container (from the CDI spec) or on the host, and says what it got on
 * standard output, one line per event, flushed at once.
 *
 *   slot_client hold    acquire (waiting as long as it takes), print
 *                       "held SLOT", wait for a line on standard input (or
 *                       its end), release, print "released"
 *   slot_client try     try once without waiting: "held SLOT" then release,
 *                       "busy", or "error: ..." with exit status 1
 *   slot_client loop N  N acquire / 2 ms job / release rounds, then
 *                       "done N"
 *   slot_client set-k K send SET_K (an admin's command) straight over the
 *                       socket transport, as any program could: "set-k: ok"
 *                       or "set-k: " and the errno's text, exit status 1
 *
 * The domain is GPUSLOT_DOMAINS's first (the CDI spec sets it), else 0.
 */
#define _GNU_SOURCE /* gettid() */
#include <errno.h>
#include <linux/gpuslot.h>
#include <gpuslot_wire.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <gpuslot.h>

static struct gpuslot_client *open_client(void)
{
	struct gpuslot_options o = { .size = sizeof(o) };
	const char *domains = getenv("GPUSLOT_DOMAINS");
	struct gpuslot_client *c;

	o.backend = GPUSLOT_BACKEND_NONE;
	o.domain = domains ? (uint32_t)strtoul(domains, NULL, 10) : 0;
	if (gpuslot_open(&o, &c) < 0) {
		printf("error: %s\n", gpuslot_last_error());
		exit(1);
	}
	return c;
}

static int set_k_over_the_socket(unsigned int k)
{
	const char *dir = getenv("GPUSLOT_SOCKET_DIR");
	const char *domains = getenv("GPUSLOT_DOMAINS");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct {
		struct gpuslot_wire w;
		struct gpuslot_set_k s;
	} req = { { GPUSLOT_WIRE_MAGIC, _IOC_NR(GPUSLOT_IOC_SET_K), 0,
		    sizeof(struct gpuslot_set_k), gettid(), 1 },
		  { sizeof(struct gpuslot_set_k), k, 0 } }, rep;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s/gpu%lu.sock", dir ? dir : "/run/gpuslot",
		 domains ? strtoul(domains, NULL, 10) : 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    send(fd, &req, sizeof(req), 0) != sizeof(req) ||
	    recv(fd, &rep, sizeof(rep), 0) < (ssize_t)sizeof(rep.w)) {
		printf("error: %s: %s\n", a.sun_path, strerror(errno));
		return 1;
	}
	if (rep.w.magic != GPUSLOT_WIRE_MAGIC) {
		/* gsl1 (API 1): a gpuslotd 1.x, which cannot parse gsl2 */
		printf("error: %s: gpuslotd answered in protocol 0x%x, not gsl2\n", a.sun_path,
		       rep.w.magic);
		return 1;
	}
	if (rep.w.error) {
		printf("set-k: %s\n", strerror(rep.w.error));
		return 1;
	}
	printf("set-k: ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct gpuslot_slot s = { .size = sizeof(s) };
	struct gpuslot_client *c;
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: slot_client hold|try|loop N|set-k K\n");
		return 2;
	}
	if (!strcmp(argv[1], "set-k") && argc == 3)
		return set_k_over_the_socket((unsigned int)strtoul(argv[2], NULL, 10));
	c = open_client();
	if (!strcmp(argv[1], "hold")) {
		char line[64];

		err = gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s);
		if (err < 0) {
			printf("error: %s\n", gpuslot_last_error());
			return 1;
		}
		printf("held %u\n", s.index);
		if (!fgets(line, sizeof(line), stdin))
			line[0] = 0;
		gpuslot_release_slot(c, &s, 0);
		printf("released\n");
	} else if (!strcmp(argv[1], "try")) {
		err = gpuslot_acquire_slot(c, 0, 0, &s);
		if (err == -ETIMEDOUT || err == -EBUSY || err == -EAGAIN) {
			printf("busy\n");
		} else if (err < 0) {
			printf("error: %s\n", gpuslot_last_error());
			return 1;
		} else {
			printf("held %u\n", s.index);
			gpuslot_release_slot(c, &s, 0);
		}
	} else if (!strcmp(argv[1], "loop") && argc == 3) {
		long n = strtol(argv[2], NULL, 10), i;
		struct timespec job = { 0, 2 * 1000 * 1000 };

		for (i = 0; i < n; i++) {
			err = gpuslot_acquire_slot(c, GPUSLOT_WAIT_FOREVER, 0, &s);
			if (err < 0) {
				printf("error: %s\n", gpuslot_last_error());
				return 1;
			}
			nanosleep(&job, NULL);
			gpuslot_release_slot(c, &s, 0);
		}
		printf("done %ld\n", n);
	} else {
		fprintf(stderr, "usage: slot_client hold|try|loop N|set-k K\n");
		return 2;
	}
	gpuslot_close(c);
	return 0;
}
