# The two commands a user needs: `make demo` and `make test`. Both install
# missing Debian packages first (scripts/bootstrap) and build with meson.
BUILD ?= build
ASAN ?= build-asan
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)

.PHONY: all build asan test unit system demo inc-demo bootstrap fuzz install clean

all: build

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) >/dev/null
	@ninja -C $(BUILD)
	@ln -sf src/cli/offpath $(BUILD)/offpath

asan: bootstrap
	@[ -f $(ASAN)/build.ninja ] || meson setup $(ASAN) -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
	@ninja -C $(ASAN)

# Unit tests (plain and under ASan+UBSan), fuzz corpus replay, system tests.
test: build asan
	@BUILD=$(BUILD) ASAN=$(ASAN) PYTHON=$(PYTHON) scripts/run-tests

# The main job: MPI_Allreduce through the switches on an emulated cluster,
# against the host's, with a plot (scripts/demo). inc-demo: the switch alone.
demo: build
	@BUILD=$(BUILD) $(PYTHON) scripts/demo

inc-demo: build
	./$(BUILD)/offpath inc_test --leaders 8 --tors 2 --count 4096 --type float32 \
		--op sum --iters 200 --drop-rate 0.02 --dup-rate 0.01

# make install PREFIX=/opt/offpath [DESTDIR=/stage]: meson install from a
# build folder of its own (build-install), so build/ keeps its prefix and is
# never reconfigured or rebuilt by an install; a later install to another
# PREFIX reconfigures build-install alone and rebuilds nothing (the binary
# finds its files relative to itself, no prefix is compiled in). The tests
# are not built there. Afterwards PREFIX/bin/offpath runs from anywhere.
PREFIX ?= /usr/local
INSTALL_BUILD ?= build-install
install: bootstrap
	@[ -f $(INSTALL_BUILD)/build.ninja ] || meson setup $(INSTALL_BUILD) -Dtests=false --prefix=$(abspath $(PREFIX)) >/dev/null
	@meson configure $(INSTALL_BUILD) --prefix=$(abspath $(PREFIX)) >/dev/null
	@ninja -C $(INSTALL_BUILD)
	@meson install -C $(INSTALL_BUILD) --no-rebuild --quiet $(if $(DESTDIR),--destdir $(DESTDIR))
	@echo "installed in $(abspath $(PREFIX)): bin/offpath; links named after the original tools in libexec/offpath/bin (put it on PATH only if you want those names)"

fuzz: bootstrap
	@[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false >/dev/null
	@ninja -C build-fuzz
	@for f in build-fuzz/tests/fuzz/fuzz_*; do \
		[ -f "$$f" ] && [ -x "$$f" ] || continue; \
		t=$${f##*/fuzz_}; mkdir -p build-fuzz/corpus-$$t; \
		cp -n tests/fuzz/corpus/$$t/* build-fuzz/corpus-$$t/ 2>/dev/null; \
		$$f -max_total_time=$${FUZZ_SECONDS:-60} build-fuzz/corpus-$$t || exit 1; done

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz $(INSTALL_BUILD)
