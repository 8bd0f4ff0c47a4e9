# tilekit - one entry point. `make` builds the library build/libtilekit.{so,a},
# the lab build/libtilekit_lab.a, the CLI build/tilekit, the Python extension
# and the tests; `make test` runs the CPU suite, `make asan-fuzz`
# the API fuzz under sanitizers (no GPU needed), `make gpu-test` the GPU
# suite, `make bench` the main job (needs an NVIDIA GPU).
#
# ARCHS: the GPU targets of the fat binary. sm_90a is Hopper with its
# architecture-specific features (wgmma, setmaxnreg); the -gencode form is
# used because the -arch=sm_90a shorthand also runs a plain sm_90 pass.
CUDA     ?= /usr/local/cuda
NVCC     ?= $(CUDA)/bin/nvcc
CC       ?= gcc
ARCHS    ?= 80 90a
PREFIX   ?= /usr/local
BUILD    ?= build
PYTHON   ?= python3
# `make` alone builds `all`: the first rule below is otherwise a dependency
# line of the distributed part's objects, which would become the goal
.DEFAULT_GOAL := all

VERSION  := 0.1.0
SOMAJOR  := 0

GENCODE  := $(foreach a,$(ARCHS),-gencode=arch=compute_$(a),code=sm_$(a))
CPPFLAGS := -Iinclude -Isrc -I$(CUDA)/include
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -Werror -fPIC -D_GNU_SOURCE
NVFLAGS  ?= -O3 -lineinfo
NVFLAGS  += -std=c++17 $(GENCODE) -Xcompiler -fPIC,-Wall -Xptxas -v --expt-relaxed-constexpr
LDLIBS   := -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lcublas -lcudart -lstdc++ -lpthread -lm -ldl
# The lab's programs also link cuBLASLt (the FP8 yardstick, src/lab/lab_cublaslt.c); the library does not.
LAB_LDLIBS := $(LDLIBS) -lcublasLt

# The library (src/lib, src/kernels) and the lab (src/lab: verify, bench,
# fuzz, profile, reports, and its own kernels), which links the library's
# static archive and its internals; libtilekit.{so,a} hold no lab object.
LIB_SRCS    := $(wildcard src/lib/*.c)
KERNEL_C    := $(wildcard src/kernels/*.c)
KERNEL_CU   := $(wildcard src/kernels/*.cu)
LAB_SRCS    := $(wildcard src/lab/*.c)
LAB_CU      := $(wildcard src/lab/*.cu)
DEV_HEADERS := $(wildcard src/tiles/*.cuh src/tiles/*.h src/ptx/*.cuh src/kernels/*.cuh src/kernels/*.h) src/lib/kernel.h include/tilekit.h src/kernels/table.def
CU_OBJS     := $(KERNEL_CU:%.cu=$(BUILD)/obj/%.o)
LIB_OBJS    := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(KERNEL_C:%.c=$(BUILD)/obj/%.o) $(CU_OBJS)
LAB_CU_OBJS := $(LAB_CU:%.cu=$(BUILD)/obj/%.o)
LAB_OBJS    := $(LAB_SRCS:%.c=$(BUILD)/obj/%.o) $(LAB_CU_OBJS)
LAB         := $(BUILD)/libtilekit_lab.a

CLI         := $(BUILD)/tilekit
QBENCH      := $(BUILD)/quant_bench
CPU_TESTS   := $(patsubst tests/host/%.c,$(BUILD)/tests/%,$(wildcard tests/host/test_*.c))
GPU_TESTS   := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu_%,$(wildcard tests/gpu/*.c)) \
               $(patsubst tests/gpu/%.cu,$(BUILD)/tests/gpucu_%,$(wildcard tests/gpu/*.cu))

# More than one GPU (issue 41, include/tilekit_dist.h): libtilekit_dist.{so,a}
# from src/dist (host C and the fixed-order sum kernel), linked against
# libtilekit and loading NCCL at run time (dlopen), so libtilekit itself
# never needs NCCL. Building it needs NCCL's header alone: nccl.h in
# $(NCCL_INCLUDE), else the CUDA toolkit's include, else /usr/include (.ci/run
# takes it from the nvidia-nccl wheel where the system has none). Without
# one, the distributed part, its tests and its bench are left out, and make
# says so.
NCCL_INCLUDE ?=
NCCL_H      := $(firstword $(wildcard $(if $(NCCL_INCLUDE),$(NCCL_INCLUDE)/nccl.h) $(CUDA)/include/nccl.h /usr/include/nccl.h))
DIST_SRCS   := $(wildcard src/dist/*.c)
DIST_CU     := $(wildcard src/dist/*.cu)
DIST_OBJS   := $(DIST_SRCS:%.c=$(BUILD)/obj/%.o) $(DIST_CU:%.cu=$(BUILD)/obj/%.o)
DIST_LIB    := $(BUILD)/libtilekit_dist.so
DIST_BENCH  := $(BUILD)/dist_bench
DIST_USERS  := $(BUILD)/obj/tests/host/test_dist.o $(BUILD)/obj/tests/gpu/test_dist.o $(BUILD)/obj/bench/dist_bench.o
ifeq ($(NCCL_H),)
CPU_TESTS   := $(filter-out $(BUILD)/tests/test_dist,$(CPU_TESTS))
GPU_TESTS   := $(filter-out $(BUILD)/tests/gpu_test_dist,$(GPU_TESTS))
DIST_ALL    :=
else
DIST_ALL    := $(DIST_LIB) $(BUILD)/libtilekit_dist.a $(DIST_BENCH)
$(DIST_OBJS) $(DIST_USERS): CPPFLAGS += -I$(dir $(NCCL_H))
$(DIST_OBJS) $(DIST_USERS): $(wildcard src/dist/*.h) include/tilekit_dist.h
endif

# The Python extension (python/tilekit/_tilekit.c): the CPython C API only,
# for $(PYTHON), built where its headers are installed (python3-dev). It
# dlopen()s libtilekit.so at run time, so it links none of it and builds in a
# second; tilekit/_lib.py finds it here in a checkout.
PY_INCLUDE := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_SUFFIX  := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PYEXT      := $(BUILD)/python/_tilekit$(PY_SUFFIX)

.PHONY: all lib lab python dist test asan-fuzz gpu-test bench install clean
all: lib lab python dist $(CLI) $(CPU_TESTS) $(GPU_TESTS) $(QBENCH)
lib: $(BUILD)/libtilekit.so $(BUILD)/libtilekit.a
ifeq ($(NCCL_H),)
dist:
	@echo "note: no nccl.h (in NCCL_INCLUDE='$(NCCL_INCLUDE)', $(CUDA)/include or /usr/include): libtilekit_dist," \
	      "its tests and dist_bench are not built (set NCCL_INCLUDE to a directory holding NCCL's nccl.h)"
else
dist: $(DIST_ALL)
endif
lab: $(LAB)

ifneq ($(wildcard $(PY_INCLUDE)/Python.h),)
python: $(PYEXT)
else
python:
	@echo "note: no Python.h for $(PYTHON) in '$(PY_INCLUDE)': the extension is not built (install python3-dev);" \
	      "the Python package then runs on its ctypes fallback"
endif
$(PYEXT): python/tilekit/_tilekit.c include/tilekit.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -I$(PY_INCLUDE) $(CFLAGS) -shared -o $@ $< -ldl

$(BUILD)/obj/%.o: %.c $(wildcard src/lib/*.h src/lab/*.h src/kernels/*.h src/tiles/*.h) include/tilekit.h src/kernels/table.def
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# tk_get_build_info (src/lib/build.c) reports ARCHS: passed to that file
# alone, rebuilt when the Makefile changes (another ARCHS on the command
# line needs a clean build, as the kernels do).
$(BUILD)/obj/src/lib/build.o $(BUILD)/asan/src/lib/build.o: CPPFLAGS += -DTK_ARCHS='"$(ARCHS)"'
$(BUILD)/obj/src/lib/build.o $(BUILD)/asan/src/lib/build.o: Makefile

# ptxas -v output (registers, spills, shared memory) is kept beside each object.
# Warnings fail the build, and so does ptxas's "Potential Performance Loss"
# (C7514/C7515: wgmma serialized), which it prints as info (docs/NOTES.md,
# session 9: a k-loop edit serialized k31/k33/k35 by 10-16% without a warning).
$(BUILD)/obj/%.o: %.cu $(DEV_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(CPPFLAGS) $(NVFLAGS) -c $< -o $@ 2> $@.ptxas || { cat $@.ptxas; exit 1; }
	@! grep -E 'error|warning|Performance Loss' $@.ptxas || { echo "nvcc warnings in $<"; exit 1; }
$(LAB_CU_OBJS): $(wildcard src/lab/*.h)

# libtilekit.so exports what include/tilekit.h declares and nothing else: a
# version script names the tk_*( of the header's preprocessed text (a name
# followed by "(*" is a function-pointer type) and makes every other symbol
# local, the library's internals and the kernels' host stubs alike. The CUDA
# runtime stays a dependency, so dlsym() on the library still finds its
# functions (the Python package's extension and fallback use that).
# tests/python/test_exports.py checks the exported list against the header.
LIB_MAP := $(BUILD)/libtilekit.map
$(LIB_MAP): include/tilekit.h
	@mkdir -p $(dir $@)
	{ echo '{ global:'; $(CC) -E -P $< | grep -oE '\<tk_[A-Za-z0-9_]+ *\( *[^* ]' | sed -E 's/ *\(.*/;/' | sort -u; \
	  echo 'local: *; };'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/libtilekit.so.$(VERSION): $(LIB_OBJS) $(LIB_MAP)
	$(CC) -shared -Wl,-soname,libtilekit.so.$(SOMAJOR) -Wl,--version-script=$(LIB_MAP) -o $@ $(LIB_OBJS) $(LDLIBS)
$(BUILD)/libtilekit.so: $(BUILD)/libtilekit.so.$(VERSION)
	ln -sf libtilekit.so.$(VERSION) $(BUILD)/libtilekit.so.$(SOMAJOR)
	ln -sf libtilekit.so.$(VERSION) $@
$(BUILD)/libtilekit.a: $(LIB_OBJS)
	rm -f $@ && ar rcs $@ $^

# libtilekit_dist.so exports what include/tilekit_dist.h declares (the same
# version-script rule), links libtilekit.so (found beside it: $$ORIGIN) and
# the CUDA runtime, and no NCCL (src/dist/nccl_load.c opens it).
DIST_MAP := $(BUILD)/libtilekit_dist.map
$(DIST_MAP): include/tilekit_dist.h
	@mkdir -p $(dir $@)
	{ echo '{ global:'; $(CC) -Iinclude -E -P $< | grep -oE '\<tk_dist_[A-Za-z0-9_]+ *\( *[^* ]' \
	  | sed -E 's/ *\(.*/;/' | sort -u; echo 'local: *; };'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/libtilekit_dist.so.$(VERSION): $(DIST_OBJS) $(DIST_MAP) $(BUILD)/libtilekit.so
	$(CC) -shared -Wl,-soname,libtilekit_dist.so.$(SOMAJOR) -Wl,--version-script=$(DIST_MAP) -o $@ $(DIST_OBJS) \
	    -L$(BUILD) -ltilekit -Wl,-rpath,'$$ORIGIN' -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lcudart -lstdc++ -lpthread -lm -ldl
$(DIST_LIB): $(BUILD)/libtilekit_dist.so.$(VERSION)
	ln -sf libtilekit_dist.so.$(VERSION) $(BUILD)/libtilekit_dist.so.$(SOMAJOR)
	ln -sf libtilekit_dist.so.$(VERSION) $@
$(BUILD)/libtilekit_dist.a: $(DIST_OBJS)
	rm -f $@ && ar rcs $@ $^
$(LAB): $(LAB_OBJS)
	rm -f $@ && ar rcs $@ $^

# Programs link the static archives (the lab's first: it calls into the
# library) so they run from the build tree as-is.
$(CLI): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/*.c)) $(LAB) $(BUILD)/libtilekit.a
	$(CC) -o $@ $^ $(LAB_LDLIBS)
# tk_quantize_fp8's DRAM rate (bench/quant_bench.c, issue 40).
$(QBENCH): $(BUILD)/obj/bench/quant_bench.o $(LAB) $(BUILD)/libtilekit.a
	$(CC) -o $@ $^ $(LAB_LDLIBS)
$(BUILD)/tests/%: $(BUILD)/obj/tests/host/%.o $(BUILD)/obj/tests/host/check.o $(LAB) $(BUILD)/libtilekit.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LAB_LDLIBS)
# The distributed part's tests and bench link its static archive (its
# internals: the plan, the checks, the NCCL loader) before the library's.
$(BUILD)/tests/test_dist: $(BUILD)/obj/tests/host/test_dist.o $(BUILD)/obj/tests/host/check.o \
    $(BUILD)/libtilekit_dist.a $(LAB) $(BUILD)/libtilekit.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LAB_LDLIBS)
$(BUILD)/tests/gpu_test_dist: $(BUILD)/obj/tests/gpu/test_dist.o $(BUILD)/obj/tests/host/check.o \
    $(BUILD)/libtilekit_dist.a $(LAB) $(BUILD)/libtilekit.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LAB_LDLIBS)
$(DIST_BENCH): $(BUILD)/obj/bench/dist_bench.o $(BUILD)/libtilekit_dist.a $(LAB) $(BUILD)/libtilekit.a
	$(CC) -o $@ $^ $(LAB_LDLIBS)
$(BUILD)/tests/gpu_%: $(BUILD)/obj/tests/gpu/%.o $(BUILD)/obj/tests/host/check.o $(LAB) $(BUILD)/libtilekit.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LAB_LDLIBS)
$(BUILD)/tests/gpucu_%: $(BUILD)/obj/tests/gpu/%.o $(BUILD)/obj/tests/host/check.o $(LAB) $(BUILD)/libtilekit.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LAB_LDLIBS)
# The tests' own headers (check.h, the GPU tests' int_gemm.h) and the
# host timer they share with the bench (bench/host_time.h).
$(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/host/*.c tests/gpu/*.c)): $(wildcard tests/host/*.h tests/gpu/*.h) \
    bench/host_time.h
$(BUILD)/obj/tests/host/check.o: tests/host/check.c tests/host/check.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

test: all
	@CUDA=$(CUDA) bash tests/run_cpu.sh $(BUILD)

# The API fuzz (tests/fuzz/fuzz_api.c: the public API alone, so no lab): the
# host C of the library rebuilt with AddressSanitizer and
# UndefinedBehaviorSanitizer in $(BUILD)/asan, any report fatal, linked with
# the library's device objects of the normal build as they are (no
# sanitizer instruments nvcc's output; the fuzz reaches none of it without a
# GPU). It models a machine without one, so no GPU is made visible to it.
# Against the CUDA runtime it needs no ASAN_OPTIONS: with no driver the
# runtime stops at its first call (cudaErrorInsufficientDriver or
# cudaErrorNoDevice), before mapping any device memory.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
ASAN_OBJS  := $(patsubst %.c,$(BUILD)/asan/%.o,$(LIB_SRCS) $(KERNEL_C) tests/fuzz/fuzz_api.c)
FUZZ       := $(BUILD)/asan/fuzz_api
FUZZ_ARGS  ?= --seconds 30 --seed 1

$(BUILD)/asan/%.o: %.c $(wildcard src/lib/*.h) include/tilekit.h src/kernels/table.def
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -O1 $(ASAN_FLAGS) -c $< -o $@
$(FUZZ): $(ASAN_OBJS) $(CU_OBJS)
	$(CC) $(ASAN_FLAGS) -o $@ $^ $(LDLIBS)

asan-fuzz: $(FUZZ)
	CUDA_VISIBLE_DEVICES=-1 $(FUZZ) $(FUZZ_ARGS)

gpu-test: all
	@bash tests/run_gpu.sh $(BUILD)

bench: all
	$(CLI) bench --kernel all --m 8192 --n 8192 --k 8192 --out fp32

install: lib dist $(CLI)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/tilekit.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/libtilekit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtilekit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtilekit.so.$(SOMAJOR)
	ln -sf libtilekit.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtilekit.so
	install -m 644 $(BUILD)/libtilekit.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/tilekit/shapes
	install -m 644 bench/shapes/*.txt $(DESTDIR)$(PREFIX)/share/tilekit/shapes/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' -e 's|@CUDA@|$(CUDA)|g' tilekit.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tilekit.pc
ifneq ($(NCCL_H),)
	install -m 644 include/tilekit_dist.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/libtilekit_dist.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtilekit_dist.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtilekit_dist.so.$(SOMAJOR)
	ln -sf libtilekit_dist.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtilekit_dist.so
endif

clean:
	rm -rf $(BUILD)
