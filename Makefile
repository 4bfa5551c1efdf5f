# scalelab — build the harness (build/libsl_common.a), the kernels (build/libsl_kernels.a),
# one program per technique (bin/<program>) and the unit tests (build/t/).
#
#   make                 build everything the machine has dependencies for
#   make check           build, then run the TAP tests with prove
#   make SANITIZE=1 check    the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make install PREFIX=/opt/scalelab
#
#   make SIMGRID=1       also the MPI programs SimGrid's SMPI can run, into build/smpi/bin/
#   make NO_OPTIONAL=1   do not install the optional packages (below) as root on Debian/Ubuntu
# Overrides: CUDA=0|1 NCCL=0|1 PAPI=0|1 CUDA_HOME=... MPICC=... SANITIZE=1 DEBUG=1 CUDA_ARCH="80 90"
# CUDA_ARCH: machine code for each listed architecture, plus the PTX of the last one (the
# newest), which the driver compiles at load time for a newer GPU: without it such a GPU fails
# every kernel with "no kernel image is available for execution on the device".
# V=1 prints every command.
# Every dependency is probed below; one line per dependency says what it enables or disables.

SHELL      := /bin/bash
MPICC      ?= mpicc
CUDA_HOME  ?= /usr/local/cuda
CUDA_ARCH  ?= 80 90
PREFIX     ?= /usr/local
SANITIZE   ?= 0
DEBUG      ?= 0
BUILD      := build
BIN        := bin
V          ?= 0
# Quiet rules: one short line per step; make V=1 shows the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n'
endif

# Dependency probes ---------------------------------------------------------------------------
# A probe is a try-compile (and link) of a small program in scripts/probes/, so that a header without its
# library (or the reverse) is reported as missing rather than failing half-way through the build.
PROBE_DIR := $(BUILD)/probe
try_link = $(shell mkdir -p $(PROBE_DIR) && $(PROBE_CC) scripts/probes/$(1).c -o $(PROBE_DIR)/$(1) $(2) \
             >/dev/null 2>&1 && echo 1 || echo 0)

HAVE_MPICC := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1 || echo 0)
# Libraries are probed with the MPI wrapper where there is one (its compiler is the one that will
# build), else with the plain C compiler, so that a missing MPI is not reported as missing BLAS.
PROBE_CC   := $(if $(filter 1,$(HAVE_MPICC)),$(MPICC),cc)
HAVE_CBLAS := $(call try_link,cblas,-lopenblas)
HAVE_HWLOC := $(call try_link,hwloc,-lhwloc)
PAPI_FOUND := $(call try_link,papi,-lpapi)
ifeq ($(HAVE_MPICC),1)
# The MPI headers for nvcc (Open MPI: --showme:compile; MPICH: -compile_info).
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null || $(MPICC) -compile_info 2>/dev/null | tr ' ' '\n' | grep '^-I' | tr '\n' ' ')
endif
# SimGrid's SMPI (make SIMGRID=1, scripts/simulate): the programs whose MPI use it supports,
# built again with smpicc by a sub-make into their own tree (SMPI_TREE=1 marks that sub-make).
# mae_threads and kernels are left out: their figures are threads and kernels on this CPU,
# which a network simulation does not change.
SIMGRID       ?= 0
SMPI_PROGRAMS := allreduce ddp zero pipeline
HAVE_SMPICC   := $(shell command -v smpicc >/dev/null 2>&1 && echo 1 || echo 0)
HAVE_PROVE   := $(shell command -v prove >/dev/null 2>&1 && echo 1 || echo 0)
HAVE_PYTHON3 := $(shell command -v python3 >/dev/null 2>&1 && echo 1 || echo 0)
# matplotlib draws the plots of report.html; scripts/report falls back on the system's python3
# (Debian's python3-matplotlib) where python3 is another interpreter, and so does this probe.
HAVE_MPL     := $(shell (python3 -c 'import matplotlib' || /usr/bin/python3 -c 'import matplotlib') \
                  >/dev/null 2>&1 && echo 1 || echo 0)
# jsonschema validates results against results/schema.json (scripts/compare, scripts/report,
# run_all.sh's summary, the tests): required, found the same way as matplotlib.
HAVE_JSONSCHEMA := $(shell (python3 -c 'import jsonschema' || /usr/bin/python3 -c 'import jsonschema') \
                     >/dev/null 2>&1 && echo 1 || echo 0)
NVCC         := $(CUDA_HOME)/bin/nvcc
CUDA_FOUND   := $(shell test -x $(NVCC) && test -e $(CUDA_HOME)/include/cublas_v2.h && \
                  ls $(CUDA_HOME)/lib64/libcublas.so >/dev/null 2>&1 && echo 1 || echo 0)
NCCL_FOUND   := $(shell (test -e $(CUDA_HOME)/include/nccl.h || test -e /usr/include/nccl.h || \
                  test -e /usr/local/include/nccl.h) && (ls $(CUDA_HOME)/lib64/libnccl.so* || \
                  ls /usr/lib/$$(cc -print-multiarch 2>/dev/null)/libnccl.so* || ls /usr/local/lib/libnccl.so*) \
                  >/dev/null 2>&1 && echo 1 || echo 0)

PAPI ?= $(PAPI_FOUND)
CUDA ?= $(CUDA_FOUND)
ifeq ($(CUDA),1)
NCCL ?= $(NCCL_FOUND)
else
NCCL := 0
endif

ifeq ($(PAPI)$(PAPI_FOUND),10)
$(error PAPI=1 was asked for but PAPI was not found (apt: libpapi-dev, dnf: papi-devel))
endif
ifeq ($(CUDA)$(CUDA_FOUND),10)
$(error CUDA=1 was asked for but nvcc and cuBLAS were not found under CUDA_HOME=$(CUDA_HOME))
endif
ifeq ($(NCCL)$(NCCL_FOUND),10)
$(error NCCL=1 was asked for but nccl.h and libnccl were not found)
endif

# What a missing required dependency needs, for the message and for scripts/install-deps.sh.
MISSING_APT :=
MISSING_DNF :=
ifneq ($(HAVE_MPICC),1)
MISSING_APT += openmpi-bin libopenmpi-dev
MISSING_DNF += openmpi-devel
endif
ifneq ($(HAVE_CBLAS),1)
MISSING_APT += libopenblas-dev
MISSING_DNF += openblas-devel
endif
ifneq ($(HAVE_HWLOC),1)
MISSING_APT += libhwloc-dev
MISSING_DNF += hwloc-devel
endif
ifneq ($(HAVE_JSONSCHEMA),1)
MISSING_APT += python3-jsonschema
MISSING_DNF += python3-jsonschema
endif

# What the main job's output uses, optional for the build: the plots of run_all.sh's
# report.html and --papi's counters. As root on Debian/Ubuntu make installs them with the
# required ones (NO_OPTIONAL=1: not); PAPI=0 given is not asked for. One that cannot be
# installed is remembered in build/optional-deps.tried, so that make does not try it again
# (make clean forgets).
NO_OPTIONAL    ?= 0
OPT_TRIED_FILE := $(BUILD)/optional-deps.tried
OPT_TRIED      := $(shell cat $(OPT_TRIED_FILE) 2>/dev/null)
MISSING_OPT_APT :=
ifeq ($(PAPI_FOUND)$(filter command line environment,$(origin PAPI)),0)
MISSING_OPT_APT += libpapi-dev
endif
ifneq ($(HAVE_MPL),1)
MISSING_OPT_APT += python3-matplotlib
endif
OPT_TO_INSTALL := $(if $(filter 1,$(NO_OPTIONAL)),,$(filter-out $(OPT_TRIED),$(MISSING_OPT_APT)))

mark = $(if $(filter 1,$(1)),✓,✗)
ifeq ($(SIMGRID)$(HAVE_SMPICC),10)
$(error SIMGRID=1 was asked for but smpicc was not found (apt: libsimgrid-dev))
endif
ifeq ($(filter clean print-build,$(MAKECMDGOALS))$(SMPI_TREE),)
$(info $(call mark,$(HAVE_MPICC)) MPI compiler ($(MPICC))      required: every program)
$(info $(call mark,$(HAVE_CBLAS)) OpenBLAS CBLAS              required: CPU GEMM)
$(info $(call mark,$(HAVE_HWLOC)) hwloc                       required: topology and rank binding in the manifest)
$(info $(call mark,$(PAPI)) PAPI                        optional: --papi hardware counters$(if $(filter 1,$(PAPI)),, (disabled: --papi will say it was not built$(if $(filter 0,$(PAPI_FOUND)),; apt: libpapi-dev, dnf: papi-devel))))
$(info $(call mark,$(HAVE_MPL)) matplotlib (python3)        optional: the plots of report.html (run_all.sh, scripts/report --html)$(if $(filter 1,$(HAVE_MPL)),, (disabled: tables only; apt/dnf: python3-matplotlib)))
$(info $(call mark,$(CUDA)) CUDA nvcc + cuBLAS          optional: -B cuda backend$(if $(filter 1,$(CUDA)),, (disabled: -B cuda will say it was not built)))
$(info $(call mark,$(NCCL)) NCCL                        optional: -C nccl collective$(if $(filter 1,$(NCCL)),, (disabled: -C nccl will say it was not built)))
$(info $(call mark,$(HAVE_SMPICC)) SimGrid SMPI (smpicc)       optional: make SIMGRID=1 builds $(SMPI_PROGRAMS) into build/smpi/bin for scripts/simulate$(if $(filter 1,$(HAVE_SMPICC)),, (disabled)))
$(info $(call mark,$(HAVE_PROVE)) prove (perl)                required: make check)
$(info $(call mark,$(HAVE_PYTHON3)) python3                     required: scripts/compare, scripts/report, run_all.sh summary)
$(info $(call mark,$(HAVE_JSONSCHEMA)) jsonschema (python3)        required: results checked against results/schema.json (compare, report, tests))
endif

# Flags ---------------------------------------------------------------------------------------
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wvla -Werror -fopenmp -pthread -Icommon -Icommon/coll -Ikernels -Ibenchmarks/train -I$(BUILD)
ifeq ($(DEBUG),1)
OPT := -O0 -g3
else
OPT := -O2 -g
endif
ifeq ($(SANITIZE),1)
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
DEFS := -DSL_HAVE_PAPI=$(PAPI) -DSL_HAVE_CUDA=$(CUDA) -DSL_HAVE_NCCL=$(NCCL)
ifeq ($(SMPI_TREE),1)
# common/sim.c folds memory explicitly, so SMPI's malloc interception is left off.
DEFS += -DSL_SMPI=1 -DSMPI_NO_OVERRIDE_MALLOC
endif
CFLAGS  += $(CFLAGS_BASE) $(OPT) $(SAN) $(DEFS)
# The CPU kernels only: math calls that never set errno (sqrtf becomes one instruction, and
# `omp simd` loops may call libmvec's expf, kernels/cpu/mvec.h) and FP exceptions not
# treated as side effects, so that branch-free selects vectorise. Neither changes a computed
# value; -ffast-math (which does) is not used.
CPU_KERNEL_CFLAGS := -fno-math-errno -fno-trapping-math
LDLIBS  := -lopenblas -lhwloc -lmvec -lm
ifeq ($(PAPI),1)
LDLIBS  += -lpapi
endif
ifeq ($(CUDA),1)
NVCCFLAGS := -O2 -g -std=c++17 $(DEFS) -DSL_DEBUG=$(DEBUG) -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Icommon -Icommon/coll -Ikernels -Ibenchmarks/train -I$(BUILD) $(MPI_CFLAGS) \
             $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH)) \
             -Xcompiler -Wall,-Wextra,-Werror,-fPIC --Werror all-warnings
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
ifeq ($(NCCL),1)
NVCCFLAGS += -I/usr/local/include
LDLIBS  += -lnccl
endif
endif
LDFLAGS += -fopenmp -pthread $(SAN)

# Sources: everything is found by wildcard, so a new file needs no Makefile edit -------------
# common/*.c, common/coll/*.c and kernels/*.c, kernels/cpu/*.c always; the cuda/*.cu beside
# them when CUDA=1, otherwise their host-only twins in nocuda/*.c. The training layer
# (benchmarks/train/*.c) sits above both and is linked into every program.
COMMON_SRC := $(wildcard common/*.c common/coll/*.c)
KERNEL_SRC := $(wildcard kernels/*.c kernels/cpu/*.c)
TRAIN_SRC  := $(wildcard benchmarks/train/*.c)
ifeq ($(CUDA),1)
COMMON_CU  := $(wildcard common/cuda/*.cu common/coll/cuda/*.cu)
KERNEL_CU  := $(wildcard kernels/cuda/*.cu)
else
COMMON_SRC += $(wildcard common/nocuda/*.c common/coll/nocuda/*.c)
KERNEL_SRC += $(wildcard kernels/nocuda/*.c)
endif
BENCH_SRC  := $(wildcard benchmarks/*.c)
TEST_SRC   := $(wildcard t/unit/*.c)

COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o) $(COMMON_CU:%.cu=$(BUILD)/%.cu.o) $(BUILD)/build_info.o
KERNEL_OBJ := $(KERNEL_SRC:%.c=$(BUILD)/%.o) $(KERNEL_CU:%.cu=$(BUILD)/%.cu.o)
TRAIN_OBJ  := $(TRAIN_SRC:%.c=$(BUILD)/%.o)
PROGRAMS   := $(BENCH_SRC:benchmarks/%.c=$(BIN)/%)
TESTS      := $(TEST_SRC:t/unit/%.c=$(BUILD)/t/%)
LIBS       := $(BUILD)/libsl_train.a $(BUILD)/libsl_kernels.a $(BUILD)/libsl_common.a

.PHONY: all check clean install install-files deps print-build smpi FORCE
# Objects of programs and tests are kept (not deleted as intermediates), so a second make
# or make check right after make rebuilds nothing.
.SECONDARY:
.DEFAULT_GOAL := all

# A missing dependency: install it where we can (Debian/Ubuntu as root), else stop with the
# package names (a required one) or build without it (an optional one: its ✗ line names the
# package). The install runs once, then make starts again with fresh probes.
CAN_AUTO_INSTALL := $(if $(strip $(MISSING_APT) $(OPT_TO_INSTALL)),$(shell test "$$(id -u)" = 0 && \
                      command -v apt-get >/dev/null && echo 1 || echo 0),0)
ifeq ($(CAN_AUTO_INSTALL)$(SL_DEPS_TRIED),1)
all check install:
	@echo "scalelab: installing missing packages with scripts/install-deps.sh:" \
	  "$(strip $(MISSING_APT) $(if $(OPT_TO_INSTALL),(optional: $(strip $(OPT_TO_INSTALL)))))"
	scripts/install-deps.sh $(MISSING_APT) $(if $(OPT_TO_INSTALL),--optional $(OPT_TO_INSTALL))
	$(if $(OPT_TO_INSTALL),@mkdir -p $(BUILD) && echo $(OPT_TRIED) $(OPT_TO_INSTALL) >$(OPT_TRIED_FILE))
	@$(MAKE) --no-print-directory SL_DEPS_TRIED=1 $@
else ifneq ($(strip $(MISSING_APT)),)
all check install:
	@echo "scalelab: missing required dependencies." >&2
	@echo "  Debian/Ubuntu: apt-get install $(strip $(MISSING_APT))" >&2
	@echo "  Fedora/RHEL:   dnf install $(strip $(MISSING_DNF))" >&2
	@echo "  Spack/modules: spack load openmpi openblas hwloc   (or: module load openmpi openblas hwloc)" >&2
	@echo "  Then run make again (MPICC=... points at another MPI compiler wrapper)." >&2
	@exit 1
else

all: $(PROGRAMS) $(TESTS) $(if $(filter 1,$(SIMGRID)),smpi)

smpi:
	$(Q)$(MAKE) --no-print-directory SMPI_TREE=1 MPICC=smpicc BUILD=$(BUILD)/smpi BIN=$(BUILD)/smpi/bin \
	  CUDA=0 NCCL=0 PAPI=0 SANITIZE=0 SIMGRID=0 $(SMPI_PROGRAMS:%=$(BUILD)/smpi/bin/%)

# make check runs CHECK_JOBS test files at a time: many wait (MPI start-up, a hung rank's time
# limit) more than they compute. A test file runs beside another unless it is named in
# CHECK_SERIAL: each has a temporary directory of its own, no fixed port or name, and time limits
# that a second test beside it cannot reach. Those of CHECK_SERIAL run afterwards, one at a time:
# gate_confirm (it measures mae_threads twice and wants the same figure; gate.t, which measures
# nothing, runs beside the others), pairs (the sweep's tight --timeout), fullfs and memlimit (a
# mount, a memory cgroup), launch (signals, binding to cores). two_hosts runs beside the others:
# its namespaces, veth pair and addresses (10.251.0.0/24; pairs' mesh is 10.252.0.0/24) are its
# own, named by its process id, and it waits within no time limit. CHECK_FIRST, the longest,
# start first.
CHECK_JOBS ?= 2
CHECK_SERIAL := gate_confirm pairs fullfs memlimit launch
CHECK_FIRST := coll labs ddp docs allreduce slurm run_all pipeline megatron_mlp zero simulate
CHECK_PAR := $(CHECK_FIRST:%=t/integration/%.t) \
  $(filter-out $(CHECK_FIRST:%=t/integration/%.t) $(CHECK_SERIAL:%=t/integration/%.t),$(sort $(wildcard t/integration/*.t))) \
  $(sort $(wildcard t/unit/*.t))
# The sanitizers' pass (SANITIZE=1) is there to run the suite's C code under ASan and UBSan. These
# test files' subject is not that code: the scripts (compare, report, validate, pairs, gpu-check,
# sl-launch, run_all.sh, install, Slurm and two-host launching) and the SimGrid build, which is
# never sanitized. Their outcome is the same in both passes, so only make check runs them; the C
# programs they start are run under the sanitizers by the programs' own test files. The same holds
# for two of the documentation's: docs (the README's and docs/'s commands, run_all.sh --quick
# among them) and lab_sheet_counts (the figures the lab sheets quote); labs.t, which runs every
# lab sheet command and so the widest range of options, runs in both.
CHECK_NOT_SANITIZED := simulate gate gate_confirm compare report_html schema scripts_hardening deps \
  gpu_check pairs pairs_schedule slurm install run_all launch two_hosts docs lab_sheet_counts
CHECK_FILES := $(if $(filter 1,$(SANITIZE)),\
  $(filter-out $(CHECK_NOT_SANITIZED:%=t/integration/%.t),$(sort $(wildcard t/integration/*.t))) \
  $(sort $(wildcard t/unit/*.t)),-r t/)

check: all
	@if [ "$(HAVE_PROVE)" != 1 ]; then echo "make check needs prove (apt: perl, dnf: perl-Test-Harness)" >&2; exit 1; fi
	@echo "prove -j$(CHECK_JOBS) -r t/ (alone, at the end: $(CHECK_SERIAL:%=%.t))"
	@$(if $(filter 1,$(SANITIZE)),echo "not under the sanitizers (make check runs them; see the Makefile): $(CHECK_NOT_SANITIZED:%=%.t)")
	@SL_SANITIZE=$(SANITIZE) prove --timer -j$(CHECK_JOBS) $(CHECK_PAR:%=--rules=par=%) $(CHECK_FILES)

# Installed layout: PREFIX/bin holds the programs and sl-launch; PREFIX/share/scalelab holds
# run_all.sh (which finds PREFIX/bin from there), its scripts, the lab sheets and the schema.
# What a user of an installed copy runs: the launcher, the report, the gate, the validator and the
# pairwise sweep, with the Python packages they import (gatelib finds the schema at
# ../../results/schema.json from itself, so the schema goes to share/scalelab/results/).
INSTALLED_SCRIPTS := scripts/sl-launch scripts/report scripts/compare scripts/validate scripts/pairs
INSTALLED_SCRIPT_DIRS := gatelib reportlib pairslib
# install-files copies what is built without building it (the install test runs it beside the
# other tests, which must not see their programs relinked under them).
install: all
	@$(MAKE) --no-print-directory install-files
install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/scalelab/scripts $(DESTDIR)$(PREFIX)/share/scalelab/labs
	install -m 755 $(PROGRAMS) scripts/sl-launch $(DESTDIR)$(PREFIX)/bin/
	install -m 755 run_all.sh $(DESTDIR)$(PREFIX)/share/scalelab/
	install -m 755 $(INSTALLED_SCRIPTS) $(DESTDIR)$(PREFIX)/share/scalelab/scripts/
	for d in $(INSTALLED_SCRIPT_DIRS); do \
	  install -d $(DESTDIR)$(PREFIX)/share/scalelab/scripts/$$d && \
	  install -m 644 scripts/$$d/*.py $(DESTDIR)$(PREFIX)/share/scalelab/scripts/$$d/ || exit 1; \
	done
	install -m 755 scripts/slurm/run_all.sbatch $(DESTDIR)$(PREFIX)/share/scalelab/scripts/
	install -m 644 benchmarks/labs/*.md $(DESTDIR)$(PREFIX)/share/scalelab/labs/
	install -m 644 README.md $(DESTDIR)$(PREFIX)/share/scalelab/
	install -d $(DESTDIR)$(PREFIX)/share/scalelab/results
	install -m 644 results/schema.json results/schema.md $(DESTDIR)$(PREFIX)/share/scalelab/results/
	install -d $(DESTDIR)$(PREFIX)/share/scalelab/docs
	install -m 644 docs/*.md $(DESTDIR)$(PREFIX)/share/scalelab/docs/
endif

# Build rules ---------------------------------------------------------------------------------
# Every object depends on a stamp of the flags it was built with, so switching SANITIZE, DEBUG,
# CUDA, PAPI or NCCL rebuilds what they change instead of linking stale objects.
# The CUDA objects have a stamp of their own: nvcc's flags do not change with SANITIZE (device
# code is not sanitized), so switching it does not recompile them.
FLAGS_STAMP := $(BUILD)/flags.stamp
NVCC_STAMP := $(BUILD)/nvcc-flags.stamp
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CFLAGS) $(CPU_KERNEL_CFLAGS) | $(NVCCFLAGS) | $(LDFLAGS) $(LDLIBS)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(NVCC_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(NVCC) $(NVCCFLAGS)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

# build_info.c carries git describe and the build options into the manifest, and the names of
# the programs ("a|b|c", for SL_TEST_SLOWDOWN's check); it is rewritten only when its content
# changes, so an unchanged tree does not relink.
empty :=
space := $(empty) $(empty)
$(BUILD)/build_info.c: FORCE
	@mkdir -p $(BUILD)
	@printf '/* generated by the Makefile */\nconst char *sl_build_git_describe = "%s";\nconst char *sl_build_options = "%s";\nconst char *sl_build_programs = "%s";\n' \
	  "$$(git describe --always --dirty --tags 2>/dev/null || echo unknown)" \
	  "CUDA=$(CUDA) NCCL=$(NCCL) PAPI=$(PAPI) SANITIZE=$(SANITIZE) DEBUG=$(DEBUG) CC=$$($(MPICC) -dumpversion 2>/dev/null)" \
	  "$(subst $(space),|,$(sort $(notdir $(BENCH_SRC:.c=))))" \
	  > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/build_info.o: $(BUILD)/build_info.c $(FLAGS_STAMP)
	$(say) CC $<
	$(Q)$(MPICC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(MPICC) $(CFLAGS) $(if $(filter $(BUILD)/kernels/cpu/%,$@),$(CPU_KERNEL_CFLAGS)) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(NVCC_STAMP)
	@mkdir -p $(dir $@)
	$(say) NVCC $<
	$(Q)$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libsl_common.a: $(COMMON_OBJ)
	@rm -f $@
	$(say) AR $@
	$(Q)ar rcs $@ $^

$(BUILD)/libsl_kernels.a: $(KERNEL_OBJ)
	@rm -f $@
	$(say) AR $@
	$(Q)ar rcs $@ $^

$(BUILD)/libsl_train.a: $(TRAIN_OBJ)
	@rm -f $@
	$(say) AR $@
	$(Q)ar rcs $@ $^

# A program's helper sources, benchmarks/<name>/*.c, are built and linked into bin/<name> only
# (a program includes their header as "<name>/header.h"); benchmarks/train/ has no train.c and
# stays the library above.
.SECONDEXPANSION:
# A program may share another's: prog_shared_<name> (vdnn trains halo_conv's conv stack).
prog_shared_vdnn := benchmarks/halo_conv/model.c benchmarks/halo_conv/grid.c
prog_helper_obj = $(patsubst %.c,$(BUILD)/%.o,$(wildcard benchmarks/$(1)/*.c) $(prog_shared_$(1)))
$(BIN)/%: $(BUILD)/benchmarks/%.o $$(call prog_helper_obj,$$*) $(LIBS) $(FLAGS_STAMP)
	@mkdir -p $(BIN)
	$(say) LINK $@
	$(Q)$(MPICC) $(LDFLAGS) $< $(call prog_helper_obj,$*) $(LIBS) $(LDLIBS) -o $@

$(BUILD)/t/%: $(BUILD)/t/unit/%.o $(LIBS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(say) LINK $@
	$(Q)$(MPICC) $(LDFLAGS) $< $(LIBS) $(LDLIBS) -o $@

clean:
	rm -rf $(BUILD) $(BIN)

# The compiler, flags and libraries a program outside benchmarks/ needs to build against the
# suite (t/integration/readme.t builds the skeletons of docs/adding-a-benchmark.md with them),
# one per line.
print-build:
	@echo '$(MPICC)'
	@echo '$(CFLAGS)'
	@echo '$(LDFLAGS) $(LIBS) $(LDLIBS)'


FORCE:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
