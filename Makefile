# gpuslot: GPU admission control for real-time Linux hosts.
#
#   make test                 unit tests + the VM suite on Debian's kernel
#   make test-unit            userspace unit tests (ASan/UBSan)
#   make test-vm              the VM suite alone
#   make check-kernel-style   checkpatch.pl --strict and sparse on kmod/ and uapi/
#   make modules              gpuslot.ko for $(KVER)
#   make demo                 not written yet: it comes with libgpuslot
#
# Every entry point installs its Debian packages first (tests/install-deps.sh).

# The kernel the module is built for and the VM boots: Debian's
# linux-image-amd64, not the running kernel (this is the CI host's).
KVER ?= $(shell dpkg-query -W -f='$${Depends}' linux-image-amd64 2>/dev/null | \
	  sed -n 's/^linux-image-\([^ ,]*\).*/\1/p')
KDIR ?= /lib/modules/$(KVER)/build
KIMAGE ?= /boot/vmlinuz-$(KVER)
BUILD ?= $(CURDIR)/build
JOBS ?= $(shell nproc)

.PHONY: all deps modules userspace test test-unit test-vm check-kernel-style \
	demo clean

all: modules userspace

deps:
	@bash tests/install-deps.sh

modules: deps
	@test -n "$(KVER)" || { echo "no linux-image-amd64 kernel found"; exit 1; }
	$(MAKE) -C kmod KDIR=$(KDIR)

userspace: deps
	cmake -S tests -B $(BUILD)/tests -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD)/tests -j $(JOBS)

test-unit: userspace
	cd $(BUILD)/tests && ctest --output-on-failure

# GTEST_ARGS picks tests, e.g. GTEST_ARGS=--gtest_filter=Lock.Stress*
test-vm: modules userspace
	@mkdir -p $(BUILD)/vm
	bash tests/vm/run-vm.sh $(KIMAGE) kmod/gpuslot.ko \
		$(BUILD)/tests/gpuslot_vm_tests $(BUILD)/vm --gtest_color=no $(GTEST_ARGS)

test: deps
	@bash tests/run-tests.sh

check-kernel-style: deps
	@bash tests/check-kernel-style.sh $(KDIR) $(BUILD)

demo:
	@echo "make demo: not written yet. It needs libgpuslot and gpuslotd, which do not exist"
	@echo "yet. 'make test-vm' shows the lock at work on a real kernel today."
	@exit 2

clean:
	-$(MAKE) -C kmod KDIR=$(KDIR) clean
	rm -rf $(BUILD)
