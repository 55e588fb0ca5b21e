# SPDX-License-Identifier: GPL-2.0
# CMake toolchain file: gpuslot's userspace (deploy/, the product; tests/,
# the tests) for arm64 with Debian's aarch64-linux-gnu cross compiler,
# against a sysroot of Debian 12's arm64 -dev packages (tests/arm64/fetch.sh
# makes it). Programs built here run on this host under qemu-user
# (qemu-aarch64 -L SYSROOT): CMake's cross-compiling emulator, which ctest
# and gtest_discover_tests use.
#
#   cmake -DCMAKE_TOOLCHAIN_FILE=tests/arm64/aarch64-linux-gnu.cmake \
#         -DGPUSLOT_ARM64_SYSROOT=SYSROOT ...
# (or GPUSLOT_ARM64_SYSROOT in the environment, as `make ... ARCH=arm64`
# sets it).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Cached: a build tree configured again later by a plain `make` or
# `cmake --build` (without the environment) keeps it, instead of running its
# programs under qemu-aarch64 -L with an empty sysroot. The environment's
# (`make ... ARCH=arm64` sets it) replaces a cached one: fetch.sh's directory
# moves with its key, and a first configure without it caches "".
if(NOT "$ENV{GPUSLOT_ARM64_SYSROOT}" STREQUAL "")
  set(GPUSLOT_ARM64_SYSROOT "$ENV{GPUSLOT_ARM64_SYSROOT}" CACHE PATH
      "the arm64 sysroot (tests/arm64/fetch.sh)" FORCE)
elseif(NOT GPUSLOT_ARM64_SYSROOT)
  set(GPUSLOT_ARM64_SYSROOT "" CACHE PATH "the arm64 sysroot (tests/arm64/fetch.sh)")
endif()
if(NOT GPUSLOT_ARM64_SYSROOT OR
   NOT IS_DIRECTORY "${GPUSLOT_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")
  message(FATAL_ERROR "GPUSLOT_ARM64_SYSROOT='${GPUSLOT_ARM64_SYSROOT}' is not an arm64 sysroot "
                      "(tests/arm64/fetch.sh --fetch makes one)")
endif()
# try_compile() projects read this file again: they need the sysroot too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES GPUSLOT_ARM64_SYSROOT)
set(CMAKE_SYSROOT "${GPUSLOT_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (libsystemd, inih, libdrm) reads the sysroot's .pc files only.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${GPUSLOT_ARM64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${GPUSLOT_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${GPUSLOT_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# LeakSanitizer stops the world with ptrace, which qemu-user does not
# emulate (it dies with "LeakSanitizer has encountered a fatal error"):
# the programs run without it; ASan's other checks and UBSan stay on.
# Set in qemu's own environment, not with its -E: ASan reads its options
# from /proc/self/environ, which qemu-user (7.2) does not emulate, so the
# guest program reads the host process's environment there.
set(CMAKE_CROSSCOMPILING_EMULATOR env ASAN_OPTIONS=detect_leaks=0
    qemu-aarch64 -L "${GPUSLOT_ARM64_SYSROOT}")
