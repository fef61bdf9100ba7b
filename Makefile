# The two commands a user needs: `make demo` and `make test`. Both install
# missing Debian packages first (scripts/bootstrap) and build with meson.
BUILD ?= build
ASAN ?= build-asan
PYTHON ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)

.PHONY: all build asan test unit system demo inc-demo bootstrap fuzz clean

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

fuzz: bootstrap
	@[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true -Dtests=false >/dev/null
	@ninja -C build-fuzz
	@for f in build-fuzz/tests/fuzz/fuzz_*; do \
		[ -f "$$f" ] && [ -x "$$f" ] || continue; \
		t=$${f##*/fuzz_}; mkdir -p build-fuzz/corpus-$$t; \
		cp -n tests/fuzz/corpus/$$t/* build-fuzz/corpus-$$t/ 2>/dev/null; \
		$$f -max_total_time=$${FUZZ_SECONDS:-60} build-fuzz/corpus-$$t || exit 1; done

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz
