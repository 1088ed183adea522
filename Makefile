# The two commands of the README's quick start. Everything else is CMake.
.PHONY: all build test bench clean
all: build
build:
	bash scripts/build.sh build
test:
	bash scripts/test-all.sh
bench:
	bash scripts/bench.sh
clean:
	rm -rf build build-*
