# Quick start: `make run` and `make test` (README.md). Both install missing Debian packages
# first. Everything else is CMake; these targets only chain its presets.

.PHONY: all deps build run test test-release test-asan test-clang test-fuzz bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release

# The README's demo, run as a user would: `corral run` starts `corral serve` in the background
# (CORRAL_HOST, default 127.0.0.1:11434) when none answers, and that server imports the demo
# model from the binary on first use. The server keeps running, as after any client command.
run: build
	build/release/corral run tiny-tolstoy "Prince Andrew"

# Every test: release build, sanitizer build, the clang warnings build and the fuzzers.
test: deps test-release test-clang test-asan test-fuzz

# Three test slots on two cores: the integration tests take turns in one (tests/CMakeLists.txt)
# and spend much of it waiting on a server or a client, so two slots for the rest keep both
# cores busy.
# The npm clients install (tests/integration/npm_install.sh) beside the first build, where
# it waits on the network and the disk while the compiler has the cores; best effort, since
# the integration tests' own setup installs whatever is still missing, and says why it failed.
test-release:
	cmake --preset release >/dev/null
	{ ! command -v npm >/dev/null || tests/integration/npm_install.sh build/npm-clients npm \
	  >build/npm-clients.log 2>&1 || true; } & cmake --build --preset release; built=$$?; \
	wait; exit $$built
	ctest --preset release -j3

test-asan:
	cmake --preset asan >/dev/null
	cmake --build --preset asan
	ctest --preset asan -j3

test-clang:
	cmake --preset clang >/dev/null
	cmake --build --preset clang

test-fuzz:
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz
	ctest --preset fuzz -j2

bench: build

clean:
	rm -rf build
