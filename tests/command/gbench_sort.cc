// A real Google Benchmark program for tests/integration/command_test.cc: the command runner reads
// its --benchmark_format=json output through the gbench adapter, one repetition per round.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

static void BM_Sort(benchmark::State& state) {
  std::mt19937_64 random(7);
  std::vector<uint64_t> data(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& x : data) x = random();
    state.ResumeTiming();
    std::sort(data.begin(), data.end());
    benchmark::DoNotOptimize(data.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Sort)->Arg(1000)->Arg(10000);

BENCHMARK_MAIN();
