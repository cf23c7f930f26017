# runthrough: the two quick-start commands (`make demo`, `make test`) and friends.
# Every target installs missing system packages first (ci-containers/install-deps.sh).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: deps build demo test lint fuzz bench compare clean startup-sweep cluster-test abi abi-test compare-abi plots install uninstall bindings

deps:
	@bash ci-containers/install-deps.sh

build: deps
	$(CARGO) build --release --workspace --exclude runthrough-gen-bindings --bins --examples

## The demo: a token around 4 ranks over shared memory, then a manager/worker job that
## survives two workers being SIGKILLed (the manager re-issues their tasks).
demo: build
	target/release/rtrun -n 4 target/release/examples/ring
	target/release/rtrun -n 6 --kill 2@300ms --kill 4@700ms target/release/examples/manager_worker

## Formatting, lints, docs and every test (unit, property, multi-process).
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps -q
	$(CARGO) test --workspace

## Fuzz every decoder of bytes another process wrote (docs/UNTRUSTED.md): FUZZ_CASES
## cases each (default 10^6) in release mode; one line per decoder with its cases and time.
## `make test` runs the same harnesses with 3000 cases each (RT_FUZZ_CASES unset).
FUZZ_CASES ?= 1000000
fuzz: deps
	RT_FUZZ_CASES=$(FUZZ_CASES) $(CARGO) test --release -p runthrough-engine -p runthrough-ft -p runthrough-launch \
		-p runthrough-shm -p runthrough-pmix -p runthrough --lib fuzz_ -- --nocapture --test-threads=1
	RT_FUZZ_CASES=$(FUZZ_CASES) $(CARGO) test --release -p runthrough-engine --test untrusted fuzz_ -- --nocapture
## The full start-up fault sweep (R31, tests/startup.rs): --kill and --stop every 20 ms
## over start-up, victim 0 and non-0, shm / fabric tcp at 4 and 8 ranks and 3 netns
## hosts; prints runs, lost jobs and job times per configuration. `make test` runs a
## subsample (every 60 ms, rotating offset).
startup-sweep: deps
	RT_STARTUP_SWEEP=full $(CARGO) test --release --test startup -- --nocapture --test-threads=1

## Everything on the container cluster (tests/cluster.rs with RT_CLUSTER_FULL=1: node
## kill, the detector alone, pause, three partitions, five minutes of lossy traffic;
## tests/cluster_slurm.rs: Slurm in the containers). `make test` runs the short part.
cluster-test: deps
	RT_CLUSTER_FULL=1 $(CARGO) test --release --test cluster -- --nocapture --test-threads=1
	@if [ -f tests/cluster_slurm.rs ]; then RT_CLUSTER_FULL=1 $(CARGO) test --release --test cluster_slurm -- --nocapture --test-threads=1; fi

## libmpi_abi.so.1, the MPI-5 standard ABI (abi/): C and Python MPI programs built against
## mpi_abi.h run on runthrough with LD_LIBRARY_PATH=target/release/abi-lib (docs/ABI.md).
abi: deps
	$(CARGO) build --release -p runthrough-abi -p runthrough-launch
	mkdir -p target/release/abi-lib
	cp target/release/libmpi_abi.so target/release/abi-lib/libmpi_abi.so.1

## Installs like an MPI (scripts/install.sh): bin/rtrun, bin/mpiexec (rtrun), bin/mpicc and
## bin/mpicxx (wrappers over cc/c++), lib/libmpi_abi.so.1 and its link name libmpi_abi.so,
## include/mpi.h, mpi_abi.h, mpi-ext.h, lib/pkgconfig/mpi-abi.pc and mpi.pc, and
## share/man/man1/rtrun.1 under PREFIX (within DESTDIR when set), from the PROFILE build
## (release, or debug). `make uninstall` with the same PREFIX and DESTDIR removes them.
PREFIX ?= /usr/local
DESTDIR ?=
PROFILE ?= release
PROFILE_FLAG = $(if $(filter debug,$(PROFILE)),,--profile $(PROFILE))
install: deps
	$(CARGO) build $(PROFILE_FLAG) -p runthrough-abi
	$(CARGO) build $(PROFILE_FLAG) -p runthrough-launch --bin rtrun
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" PROFILE="$(PROFILE)" bash scripts/install.sh install

uninstall:
	PREFIX="$(PREFIX)" DESTDIR="$(DESTDIR)" bash scripts/install.sh uninstall

## The ABI checks in release mode (tests/abi.rs; `make test` runs them too), then mpi4py's
## own test suite built against the standard ABI, on runthrough and on MPICH's library.
abi-test: abi
	$(CARGO) test --release --test abi
	bash abi/mpi4py/build.sh
	for n in 1 2 4; do \
		bash abi/mpi4py/run.sh --lib target/release/abi-lib --launcher target/release/rtrun -n $$n --timeout 300; \
		bash abi/mpi4py/run.sh --lib bench/venvs/mpich/lib --launcher bench/venvs/mpich/bin/mpiexec -n $$n --timeout 300; \
	done

## The same C binaries (built once with MPICH's mpicc_abi) on MPICH and on runthrough.
compare-abi: abi
	bash bench/compare_abi.sh

## Regenerates the committed libfabric and PMIx bindings (fabric/src/ffi/bindings.rs,
## pmix/src/ffi/bindings.rs) with bindgen from the installed headers (libfabric-dev,
## libpmix-dev, libclang: tools/gen-bindings). Building never runs bindgen; `make test`
## fails while the committed files differ from what these headers give.
bindings: deps
	$(CARGO) run -p runthrough-gen-bindings

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## Criterion micro-benches and the OSU-style programs (2 ranks, shared memory).
bench: build
	$(CARGO) bench --workspace
	target/release/rtrun -n 2 target/release/osu_latency
	target/release/rtrun -n 2 target/release/osu_bw
	target/release/rtrun -n 2 target/release/osu_bibw

## Side-by-side with Open MPI 5 and MPICH 5 (installs them from PyPI into bench/venvs).
compare: build
	bash bench/compare.sh

## SVG plots of the benchmark tables bench/data/*.csv with gnuplot, into bench/plots/
## (one file per plot, listed in bench/plots/README.md); needs no build. Each plot draws
## one run (host and commit, named in its title): the latest that has rows for it, or
## PLOTS_FLAGS="--host H --commit C" for another.
PLOTS_FLAGS ?=
plots: deps
	bash bench/plots.sh $(PLOTS_FLAGS)

clean:
	$(CARGO) clean
