#!/usr/bin/env bash
# Builds flint and runs every test (docs/testing.md says what each stage runs, why, and how
# long it takes on a 2-core machine). Run scripts/setup.sh first on a new machine.
#   main  g++ build of everything: the GoogleTest suites, the Python reference and golden
#         comparisons, the command-line tests
#   fuzz  clang build with libFuzzer: each fuzz target for a bounded time
#   asan  g++ build with AddressSanitizer + UndefinedBehaviorSanitizer: the GoogleTest suites
#         and the command-line tests (not the long golden and Python reference comparisons)
#   tsan  g++ build with ThreadSanitizer of the engine, KV and server tests: the concurrency
#         tests (EngineThreads.*, DiskTier.*, HttpServer.*, Metrics.*, ResponseStore.*, and the
#         ApiServer tests of readiness, streaming, disconnects, the full queue and shutdown)
# `scripts/test.sh` runs all four in this order; `scripts/test.sh asan tsan` runs only those.
# Any failure (a test, or a sanitizer report, which fails its test) fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
STAGES=("$@")
if [ ${#STAGES[@]} -eq 0 ]; then STAGES=(main fuzz asan tsan); fi

# Sanitizer builds: -O2, since the tests run the model (10-40x slower than the main build at
# -O1); the longest numeric tests also shrink there (tests/model/tiny_fixture.h, kSanitized). g++ by default, because it compiles the
# whole tree (clang-14 lacks C++20's capture of structured bindings in lambdas, which some
# tests use); SANITIZER_CXX=clang++-14 SANITIZER_CC=clang-14 picks clang.
SANITIZER_CC=${SANITIZER_CC:-gcc}
SANITIZER_CXX=${SANITIZER_CXX:-g++}
SANITIZER_FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLINT_BUILD_BENCH=OFF
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g -DNDEBUG")
# A report fails the test that triggered it (UBSan aborts: -fno-sanitize-recover).
ASAN_ENV=(ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1:strict_init_order=1}
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1})
TSAN_ENV=(TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1})

stage_main() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$JOBS"
  ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 900
}

stage_fuzz() {
  # libFuzzer needs clang; the fuzz build compiles only what the fuzz targets link.
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DFLINT_FUZZ_ONLY=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-fuzz -j "$JOBS"
  ctest --test-dir build-fuzz --output-on-failure -j "$JOBS"
}

stage_asan() {
  CC=$SANITIZER_CC CXX=$SANITIZER_CXX cmake -S . -B build-asan "${SANITIZER_FLAGS[@]}" \
    -DFLINT_SANITIZE=address >/dev/null
  env "${ASAN_ENV[@]}" cmake --build build-asan -j "$JOBS"  # test discovery runs the tests
  # Labels "reference" and "golden": the Python reference and llama.cpp comparisons, minutes
  # of numpy per test that check numbers, not memory (the main stage runs them). Labels "sdk"
  # and "web": the client-library and browser tests check the protocol against the main
  # build; the server's code runs under ASan through its GoogleTest suites (ApiServer.*,
  # ApiLoad.* with 200 streams), without node and Chromium timing out on a slowed model.
  # Label "parallel": the ranks run Open MPI, whose MPI_Init allocates what it never frees
  # (LeakSanitizer would fail every rank); what flint adds for parallelism is checked here by
  # the GoogleTest suites (KvJournal.*, Shard.*, WeightMatrix.CopyColumns*, DebugFault.*).
  env "${ASAN_ENV[@]}" ctest --test-dir build-asan --output-on-failure -j "$JOBS" --timeout 900 \
    -LE '^(reference|golden|sdk|web|parallel)$'
}

stage_tsan() {
  CC=$SANITIZER_CC CXX=$SANITIZER_CXX cmake -S . -B build-tsan "${SANITIZER_FLAGS[@]}" \
    -DFLINT_SANITIZE=thread >/dev/null
  env "${TSAN_ENV[@]}" cmake --build build-tsan -j "$JOBS" \
    --target flint_engine_tests flint_kv_tests flint_server_tests
  # The other test programs are not built here (ctest lists them as *_NOT_BUILT); the regex
  # selects the concurrency tests only. No match (while a suite has no such test yet) is fine.
  env "${TSAN_ENV[@]}" ctest --test-dir build-tsan --output-on-failure -j "$JOBS" --timeout 900 \
    --no-tests=ignore \
    -R '^(EngineThreads|DiskTier|HttpServer|Metrics|ResponseStore)\.|^ApiServer\.(HealthIs503|ChatStreamedEqualsWhole|ClientDisconnect|FullQueueIs429|MetricsCount|ShutdownLets)'
}

for stage in "${STAGES[@]}"; do
  case "$stage" in
    main | fuzz | asan | tsan) ;;
    *)
      echo "scripts/test.sh: unknown stage '$stage' (stages: main fuzz asan tsan)" >&2
      exit 2
      ;;
  esac
done
for stage in "${STAGES[@]}"; do
  echo "=== scripts/test.sh: $stage"
  start=$SECONDS
  "stage_$stage"
  echo "=== scripts/test.sh: $stage passed in $((SECONDS - start)) s"
done
