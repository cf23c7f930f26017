# runthrough: the two quick-start commands (`make demo`, `make test`) and friends.
# Every target installs missing system packages first (ci-containers/install-deps.sh).

CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: deps build demo test lint bench compare clean

deps:
	@bash ci-containers/install-deps.sh

build: deps
	$(CARGO) build --release --workspace --bins --examples

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

clean:
	$(CARGO) clean
