# gpuslot: GPU admission control for real-time Linux hosts.
#
#   make test                 unit tests + the VM suite on Debian's kernel
#   make test-unit            userspace unit tests (ASan/UBSan)
#   make test-vm              the VM suite alone; KERNEL=stock (default), rt,
#                             6.12, debug, bullseye, trixie-bpo or trixie-bpo-rt
#   make test-python          the Python package's tests (pytest) on this host,
#                             against a gpuslotd serving the socket transport
#   make test-python-vm       the same against the module, in the VM
#   make test-cdi-metrics     containers from the CDI spec (podman, runc) and
#                             a Prometheus server scraping gpuslotd, on this
#                             host's socket transport
#   make fuzz                 libFuzzer on the lock core for FUZZ_SECONDS (60)
#   make bench                lock benchmarks in the VM, against the alternatives
#   make bench-host           the same on this host's running kernel (root)
#   make check-kernel-style   checkpatch.pl --strict and sparse on kmod/ and uapi/
#   make modules              gpuslot.ko for $(KVER)
#   make demo                 the whole system at work in the test VM
#   make install / uninstall  the product under $(DESTDIR)$(PREFIX) (/usr/local)
#   make deb                  Debian packages in build/deb; DIST=bookworm|trixie,
#                             ARCH=amd64|arm64 (build/deb-DIST-ARCH; arm64:
#                             build/arm64/deb-DIST-arm64)
#   make test-system          packages on a booted Debian 12 with systemd (VM);
#                             DIST=trixie: on a booted Debian 13
#   make test-toolchains      the userspace with GCC 11 and Clang 14, with and
#                             without prometheus-cpp; one build's unit tests
#
# Every entry point installs its Debian packages first (tests/install-deps.sh).

BUILD ?= $(CURDIR)/build
JOBS ?= $(shell nproc)

# ccache in front of the compilers of the CMake builds this Makefile and
# its scripts configure (tests/ with ASan/UBSan, the release, the arm64
# cross build, the no-metrics and toolchain builds) where it is installed:
# CI builds the same sources from a clean clone every run, and tests/ alone
# took 11 of its 50 minutes on 2 cores. The cache is ccache's own
# (~/.cache/ccache), keyed on paths relative to this tree (CCACHE_BASEDIR;
# CCACHE_NOHASHDIR: a clone elsewhere hits it too, its debug information
# then naming the first clone's directory). A compile that fails, a warning
# under -Werror included, is never cached, so a cached build warns as an
# uncached one. GPUSLOT_CCACHE=0 builds without it. Not the Debian
# packages: they build as Debian's build daemons build them (in a chroot,
# or for Debian 12 amd64 on this host, without these settings). ccache is
# found when make starts: on a fresh machine the first run installs it
# (make deps) and builds without it.
GPUSLOT_CCACHE ?= $(if $(shell command -v ccache),1,0)
ifeq ($(GPUSLOT_CCACHE),1)
export GPUSLOT_CMAKE_LAUNCHER := -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= true
else ifeq ($(GPUSLOT_CCACHE),0)
# Empty, not absent: a build tree configured with ccache before drops it.
export GPUSLOT_CMAKE_LAUNCHER := -DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=
else
$(error GPUSLOT_CCACHE=$(GPUSLOT_CCACHE): use 1 (ccache, the default where installed) or 0)
endif

# The kernel the module is built for and the VM boots, never the running
# kernel (that is the CI host's):
#   stock  Debian 12's linux-image-amd64
#   rt     Debian 12's linux-image-rt-amd64 (PREEMPT_RT)
#   6.12   Debian 12's linux-image-6.12-amd64 (the kernel line of Debian 13
#          and of current Ubuntu releases)
#   debug  6.1 from Debian's linux-source with lockdep, KASAN, kmemleak and
#          friends, built by tests/debug-kernel/build.sh and cached in
#          DEBUG_KERNEL_CACHE
# and, from a debootstrap chroot of their own Debian release (their packages
# need that release's libc and compiler), made by tests/kernels/chroot.sh
# and cached in DEBUG_KERNEL_CACHE; the module is built inside it:
#   bullseye       Debian 11's linux-image-amd64 (5.10)
#   trixie-bpo     Debian 13's newest backports kernel (trixie-backports'
#                  linux-image-amd64: 7.x)
#   trixie-bpo-rt  its PREEMPT_RT flavour (linux-image-rt-amd64)
# Named by the release they come from, not by version: trixie-bpo stays
# the newest backports kernel as its version moves on.
KERNEL ?= stock
CHROOT_KERNELS := bullseye trixie-bpo trixie-bpo-rt
DEBUG_KERNEL_CACHE ?= $(HOME)/.cache/gpuslot
ifeq ($(KERNEL),stock)
KPKG := linux-image-amd64
else ifeq ($(KERNEL),rt)
KPKG := linux-image-rt-amd64
else ifeq ($(KERNEL),6.12)
KPKG := linux-image-6.12-amd64
else ifeq ($(KERNEL),debug)
KDIR ?= $(shell bash tests/debug-kernel/build.sh --print-dir $(DEBUG_KERNEL_CACHE))
KIMAGE ?= $(KDIR)/arch/x86/boot/bzImage
else ifneq ($(filter $(CHROOT_KERNELS),$(KERNEL)),)
KCHROOT = bash tests/kernels/chroot.sh
KCHROOT_DIR := $(shell bash tests/kernels/chroot.sh --print-dir $(DEBUG_KERNEL_CACHE) $(KERNEL))
# Known once the chroot is made (`make modules` makes it): deferred.
KVER ?= $(shell bash tests/kernels/chroot.sh --print-kver $(DEBUG_KERNEL_CACHE) $(KERNEL))
# (build/ in the chroot is a link to /usr/src, absolute: it leads out of it.)
KDIR ?= $(KCHROOT_DIR)/root/usr/src/linux-headers-$(KVER)
KIMAGE ?= $(KCHROOT_DIR)/root/boot/vmlinuz-$(KVER)
# The kernel checks at boot that the IO-APIC timer ticks, and panics
# ("IO-APIC + timer doesn't work!") when TCG on a loaded host is too slow for
# it: seen on 5.10 and 7.3 here. no_timer_check skips that check, as KVM
# guests do.
VM_APPEND := no_timer_check
else
$(error KERNEL=$(KERNEL): use stock, rt, 6.12, debug, bullseye, trixie-bpo or trixie-bpo-rt)
endif
ifdef KPKG
KVER ?= $(shell dpkg-query -W -f='$${Depends}' $(KPKG) 2>/dev/null | \
	  sed -n 's/^linux-image-\([^ ,]*\).*/\1/p')
KDIR ?= /lib/modules/$(KVER)/build
KIMAGE ?= /boot/vmlinuz-$(KVER)
endif

# ARCH=arm64 (every Jetson is arm64): the same on Debian 12's arm64 6.1
# kernel (the upload of KERNEL=stock; no other KERNEL), cross-built on this
# host from Debian 12's arm64 packages, which tests/arm64/fetch.sh fetches
# once into DEBUG_KERNEL_CACHE (arm64-<key>/) without adding arm64 to dpkg:
#   make modules ARCH=arm64    gpuslot.ko for aarch64, against
#                              linux-headers-*-arm64 (kbuild's host tools
#                              are this host's linux-kbuild-6.1)
#   make test-vm ARCH=arm64    the VM suite in qemu-system-aarch64 (TCG,
#                              -M virt), its programs cross-built static
#   make test-arm64            the userspace unit tests, cross-built with
#                              tests/arm64/aarch64-linux-gnu.cmake, run
#                              under qemu-user (ASan/UBSan; no LeakSanitizer)
# Its build trees are under $(BUILD)/arm64.
ifeq ($(ARCH),aarch64)
# Debian's name and the kernel's for the same architecture: arm64 here and
# in every sub-make (kbuild knows only arm64), whose MAKEFLAGS would carry
# the command line's ARCH=aarch64 otherwise.
override ARCH := arm64
MAKEOVERRIDES := $(patsubst ARCH=aarch64,ARCH=arm64,$(MAKEOVERRIDES))
endif
ifeq ($(ARCH),arm64)
ifneq ($(KERNEL),stock)
$(error ARCH=arm64 runs Debian 12's arm64 kernel only: leave KERNEL=$(KERNEL) out)
endif
ARM64_DIR := $(shell bash tests/arm64/fetch.sh --print-dir $(DEBUG_KERNEL_CACHE))
KDIR := $(ARM64_DIR)/kernel/kdir
KIMAGE := $(ARM64_DIR)/kernel/Image
override BUILD := $(BUILD)/arm64
export CROSS_COMPILE := aarch64-linux-gnu-
# CMake (3.21 and later) takes a new build tree's toolchain file from here.
export CMAKE_TOOLCHAIN_FILE := $(CURDIR)/tests/arm64/aarch64-linux-gnu.cmake
export GPUSLOT_ARM64_SYSROOT := $(ARM64_DIR)/sysroot
export GPUSLOT_VM_ARCH := arm64
export GPUSLOT_VM_BUSYBOX := $(ARM64_DIR)/busybox
export GPUSLOT_VM_SYSROOT := $(ARM64_DIR)/sysroot
modules userspace release: arm64-packages
endif

.PHONY: arm64-packages test-arm64
arm64-packages: deps
	bash tests/arm64/fetch.sh --fetch $(DEBUG_KERNEL_CACHE)

test-arm64:
	$(MAKE) --no-print-directory test-unit ARCH=arm64

.PHONY: all deps modules kernel-chroot debug-kernel userspace test test-unit test-vm test-socket \
	test-python test-python-vm test-cdi-metrics test-no-metrics fuzz \
	bench bench-host check-kernel-style demo clean release install uninstall \
	deb test-system test-toolchains

all: modules userspace

deps:
	@bash tests/install-deps.sh

ifdef KCHROOT
# debootstrap and chroot need root (sudo when not).
SUDO = $$([ "$$(id -u)" -eq 0 ] || echo sudo)
modules: deps
	$(SUDO) $(KCHROOT) --module $(DEBUG_KERNEL_CACHE) $(KERNEL) kmod
kernel-chroot: deps
	$(SUDO) $(KCHROOT) --build $(DEBUG_KERNEL_CACHE) $(KERNEL)
else
modules: deps $(if $(filter debug,$(KERNEL)),debug-kernel)
	@test -d "$(KDIR)" || { echo "no kernel build tree for KERNEL=$(KERNEL) at '$(KDIR)'"; exit 1; }
	$(MAKE) -C kmod KDIR=$(KDIR) clean >/dev/null
	$(MAKE) -C kmod KDIR=$(KDIR)
endif

debug-kernel: deps
	bash tests/debug-kernel/build.sh --build $(DEBUG_KERNEL_CACHE)

userspace: deps
	cmake -S tests -B $(BUILD)/tests -DCMAKE_BUILD_TYPE=RelWithDebInfo $(GPUSLOT_CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD)/tests -j $(JOBS)

# Each test has a time limit of its own (tests/CMakeLists.txt); --timeout
# is the limit of any that might have none.
test-unit: userspace
	cd $(BUILD)/tests && ctest --output-on-failure --timeout 300

# What the VM gets besides the module and the program it runs.
VM_FILES = GPUSLOT_VM_FIXTURES=tests/fixtures GPUSLOT_VM_BINARIES="$(addprefix \
	$(BUILD)/tests/,daemon/gpuslotd daemon/gpuslotctl libclient/gpuslot_example_c \
	libclient/gpuslot_example_cpp)"

# GTEST_ARGS picks tests, e.g. GTEST_ARGS=--gtest_filter=Lock.Stress*
test-vm: modules userspace
	@mkdir -p $(BUILD)/vm
	$(VM_FILES) GPUSLOT_VM_APPEND="$(VM_APPEND)" bash tests/vm/run-vm.sh $(KIMAGE) kmod/gpuslot.ko \
		$(BUILD)/tests/gpuslot_vm_tests $(BUILD)/vm-$(KERNEL) \
		--gtest_color=no $(GTEST_ARGS)

# The VM suite's lock, queue, layout, asynchronous-acquire and client tests
# (and the boost tests that need neither a VM's four CPUs nor two domains)
# on the socket transport: gpuslotd's lock server on this host, no VM.
SOCKET_TESTS = Lock.*:Hqd.*:Layouts.*:Async.*:Client.*:ClientWork.*:Sysfs.*:Boost.AHolderThatLowers*:Boost.NestedHoldsOfOneDomain*:Boost.MaxHold*:Boost.ABoostPriorityNothing*:Boost.AThreadWhoseCredentials*:Boost.ABoostHasABudget*:Boost.ABudgetIsTheMembers*:Boost.AWaiterLendsToTheHolders*:Boost.InheritanceBeginsNoBoostForAHoldPastMaxHold
# As root (sudo when not), as in the VM: the tests drop privileges to see
# refusals, and the boost needs CAP_SYS_NICE.
test-socket: userspace
	$$([ "$$(id -u)" -eq 0 ] || echo sudo) env GPUSLOT_TEST_TRANSPORT=socket \
		GPUSLOT_TEST_BIN_DIR=$(BUILD)/tests/libclient \
		$(BUILD)/tests/gpuslot_vm_tests --gtest_color=no \
		--gtest_filter='$(SOCKET_TESTS)' $(GTEST_ARGS)

# The Python package (python/) over the product build's libgpuslot.so.1:
# pytest against a gpuslotd of that build serving the bundled Radeon VII on
# its socket transport (python/tests/conftest.py starts it); and the
# chapter-6 experiments' harness with its none backend (tests/gpu/ch6/). As root when
# it can be (sudo when not) so that the boost is tested too. A test that
# runs past PYTEST_TIMEOUT seconds ends the run with its name and every
# thread's stack (pytest-timeout's thread method: it stops a test blocked in
# C code too, which a signal would not).
PYTEST_TIMEOUT ?= 300
PYTEST = /usr/bin/python3 -m pytest -p no:cacheprovider --color=no -q \
	--timeout=$(PYTEST_TIMEOUT) --timeout-method=thread python/tests tests/gpu/ch6/tests
PYTHON_TEST_ENV = GPUSLOT_LIBRARY=$(RELEASE)/libclient/libgpuslot.so.1 \
	GPUSLOT_TEST_GPUSLOTD=$(RELEASE)/daemon/gpuslotd \
	GPUSLOT_TEST_GPUSLOTCTL=$(RELEASE)/daemon/gpuslotctl PYTHONPATH=$(CURDIR)/python
test-python: release
	$$([ "$$(id -u)" -eq 0 ] || echo sudo) env $(PYTHON_TEST_ENV) $(PYTEST) $(PYTEST_ARGS)

# The same tests against the module in the VM: Debian's python3 and pytest
# and the package go into the initramfs (tests/vm/python-suite.sh).
test-python-vm: modules release
	@mkdir -p $(BUILD)/vm
	GPUSLOT_VM_PYTHON=$(CURDIR)/python GPUSLOT_VM_LIBGPUSLOT=$(RELEASE)/libclient/libgpuslot.so.1 \
		GPUSLOT_VM_BINARIES="$(RELEASE)/daemon/gpuslotctl" \
		bash tests/vm/run-vm.sh $(KIMAGE) kmod/gpuslot.ko tests/vm/python-suite.sh \
		$(BUILD)/vm-python-$(KERNEL) $(PYTEST_ARGS)

# The containers-and-metrics tests (tests/containers/) on the product
# build: podman (rootful, runc) runs containers from `gpuslotctl cdi
# generate`'s spec against gpuslotd's socket transport; Debian's prometheus
# scrapes gpuslotd while clients run. As root (sudo when not): podman is
# rootful, and the clients drop to an unprivileged member of gpuslot.
# Each script has CDI_METRICS_TIMEOUT seconds (each takes about 40 s).
CDI_FIXTURE = tests/fixtures/kfd/radeon-vii-gfx906
CDI_METRICS_TIMEOUT ?= 600
test-cdi-metrics: release
	@out=$$(mktemp); \
	for t in cdi-test prometheus-test; do \
		{ timeout -k 30 $(CDI_METRICS_TIMEOUT) bash tests/containers/$$t.sh \
			$(RELEASE) $(CDI_FIXTURE) 2>&1; [ $$? -ne 124 ] || \
			echo "$$t: did not finish in $(CDI_METRICS_TIMEOUT) s"; } | tee -a $$out; \
	done; \
	sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$$/\1 \2/p' $$out | \
		awk '{p += $$1; f += $$2; n++} END {if (n != 2) f++; \
		print p " passed, " f " failed"; exit f > 0}'; \
	rc=$$?; rm -f $$out; exit $$rc

# gpuslotd built where prometheus-cpp is absent (Ubuntu 22.04): configured
# with it hidden, it builds, runs, and says it has no metrics
# (tests/no-metrics-test.sh; about 2 minutes on 2 cores).
test-no-metrics: deps
	bash tests/no-metrics-test.sh $(BUILD)/no-metrics

# BENCH_ARGS passes Google Benchmark flags, e.g. --benchmark_filter=handoff.
# The repetitions of all benchmarks run in a random order, interleaved, so
# that a slow phase of the machine is shared by every lock instead of
# landing on one lock's figures.
BENCH_FLAGS := --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
	--benchmark_enable_random_interleaving=true
bench: modules userspace
	@mkdir -p $(BUILD)/bench
	RUN_VM_SUMMARY=0 bash tests/vm/run-vm.sh $(KIMAGE) kmod/gpuslot.ko \
		$(BUILD)/tests/gpuslot_bench $(BUILD)/bench --benchmark_color=false \
		$(BENCH_FLAGS) $(BENCH_ARGS)
	@sed -n '/^| measurement/,/^what the alternatives/p' $(BUILD)/bench/serial.log \
		>$(BUILD)/bench/table.md
	@echo "bench: the table is in $(BUILD)/bench/table.md"

# On a real host: the module built for the running kernel, loaded for the
# run and unloaded afterwards. Needs root and a kernel without gpuslot loaded.
bench-host: userspace
	$(MAKE) -C kmod KDIR=/lib/modules/$$(uname -r)/build clean >/dev/null
	$(MAKE) -C kmod KDIR=/lib/modules/$$(uname -r)/build
	insmod kmod/gpuslot.ko
	$(BUILD)/tests/gpuslot_bench $(BENCH_FLAGS) $(BENCH_ARGS); rc=$$?; rmmod gpuslot; exit $$rc

FUZZ_SECONDS ?= 60
fuzz: deps
	bash kmod/lockcore/fuzz/run-fuzz.sh $(BUILD) $(FUZZ_SECONDS)

test: deps
	@bash tests/run-tests.sh

# KERNEL=bullseye, trixie-bpo or trixie-bpo-rt: sparse and W=1 run in that
# kernel's chroot, with its release's compiler and sparse.
check-kernel-style: deps $(if $(KCHROOT),kernel-chroot)
	@$(if $(KCHROOT),GPUSLOT_KERNEL_CHROOT="$(SUDO) $(KCHROOT) --module $(DEBUG_KERNEL_CACHE) $(KERNEL)") \
		bash tests/check-kernel-style.sh $(KDIR) $(BUILD)

# gpuslotd, six libgpuslot clients and gpuslotctl in the VM (tests/demo/).
# TRANSPORT=socket: the same on this host's kernel, no VM and no module:
# gpuslotd serves the lock on its socket transport (as root, sudo when not,
# for the SCHED_FIFO boost the demo checks).
ifeq ($(TRANSPORT),socket)
demo: userspace
	$$([ "$$(id -u)" -eq 0 ] || echo sudo) timeout -k 10 300 env GPUSLOT_DEMO_TRANSPORT=socket \
		GPUSLOT_DEMO_BIN=$(BUILD)/tests/daemon GPUSLOT_DEMO_FIXTURES=$(CURDIR)/tests/fixtures \
		$(BUILD)/tests/gpuslot_demo
else
demo: modules userspace
	@mkdir -p $(BUILD)/demo
	$(VM_FILES) RUN_VM_SUMMARY=0 bash tests/vm/run-vm.sh $(KIMAGE) kmod/gpuslot.ko \
		$(BUILD)/tests/gpuslot_demo $(BUILD)/demo
endif

# The product build: no sanitizers, installed by `make install`.
PREFIX ?= /usr/local
RELEASE := $(BUILD)/release
release: deps
	cmake -S deploy -B $(RELEASE) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_INSTALL_PREFIX=$(PREFIX) $(GPUSLOT_CMAKE_LAUNCHER) >/dev/null
	cmake --build $(RELEASE) -j $(JOBS)

install: release
	DESTDIR=$(DESTDIR) cmake --install $(RELEASE)

# Removes what the last `make install` from this tree installed.
uninstall:
	@test -f $(RELEASE)/install_manifest.txt || \
		{ echo "make uninstall: $(RELEASE)/install_manifest.txt is missing: nothing was installed from here"; exit 1; }
	sed 's|^|$(DESTDIR)|' $(RELEASE)/install_manifest.txt | xargs -d '\n' rm -fv
	-sed 's|^|$(DESTDIR)|' $(RELEASE)/install_manifest.txt | xargs -d '\n' -n1 dirname | \
		sort -u | xargs -d '\n' rmdir -p --ignore-fail-on-non-empty 2>/dev/null

# The Debian packages for DIST (bookworm, default, or trixie) and ARCH
# (amd64, default, or arm64; ARCH=aarch64 is arm64). bookworm amd64 builds
# on this host into $(BUILD)/deb; the others in a chroot of DIST
# (deploy/debian/build-chroot.sh, cached in ~/.cache/gpuslot), arm64
# cross-built there, into $(BUILD)/deb-DIST-ARCH ($(BUILD) is build/arm64
# under ARCH=arm64). lintian checks each.
DIST ?= bookworm
DEB_ARCH ?= $(if $(filter arm64,$(ARCH)),arm64,amd64)
DEB_DIR := $(BUILD)/deb$(if $(filter bookworm-amd64,$(DIST)-$(DEB_ARCH)),,-$(DIST)-$(DEB_ARCH))
deb: deps
	bash deploy/debian/build-debs.sh $(DEB_DIR) $(DIST) $(DEB_ARCH) $(DEBUG_KERNEL_CACHE)

# The packages on a Debian DIST rootfs (12 or 13, amd64) booted with
# systemd (tests/system/); `make deb` has linted them.
test-system: deb
	@[ "$(DEB_ARCH)" = amd64 ] || { echo "make test-system: amd64 only (ARCH=$(ARCH))"; exit 1; }
	bash tests/system/run-system-test.sh $(DEB_DIR) $(BUILD)/system$(if $(filter trixie,$(DIST)),-trixie) \
		$(DEBUG_KERNEL_CACHE) $(DIST)

# The userspace with the other compilers of the toolchain floor (GCC 11,
# Clang 14), with and without prometheus-cpp; the unit tests of one
# (tests/toolchains.sh; TOOLCHAINS= picks builds).
test-toolchains: deps
	bash tests/toolchains.sh $(BUILD)/toolchains $(TOOLCHAINS)

clean:
	-$(MAKE) -C kmod KDIR=$(KDIR) clean
	rm -rf $(BUILD)
