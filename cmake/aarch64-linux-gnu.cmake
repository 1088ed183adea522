# Cross-compiling tenon for aarch64 Linux with Debian's cross toolchain
# (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, libc6-dev-arm64-cross) and
# running the tests under qemu-user (qemu-aarch64): ctest puts the emulator
# in front of every test command. scripts/test-aarch64.sh drives it.
#
# The page size is taken at run time by the allocator; export QEMU_PAGESIZE
# (qemu-aarch64's -p) before ctest to run the same binaries with 64 KiB pages.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(TENON_AARCH64_SYSROOT /usr/aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${TENON_AARCH64_SYSROOT})

# Headers and libraries come from the cross sysroot (plus any prefix the caller
# adds, such as the aarch64 GoogleTest build); programs from the host.
list(APPEND CMAKE_FIND_ROOT_PATH ${TENON_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
