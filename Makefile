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

# Every test: the release build's, clang's warnings check, the sanitizer build's and the
# fuzzers, each next preset built at low priority beside the tests before it
# (scripts/test-all.sh). The targets below run one preset each.
test: deps
	scripts/test-all.sh

# Three test slots on two cores: the integration tests take turns in one (tests/CMakeLists.txt)
# and spend much of it waiting on a server or a client, so two slots for the rest keep both
# cores busy.
test-release:
	cmake --preset release >/dev/null
	cmake --build --preset release
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
