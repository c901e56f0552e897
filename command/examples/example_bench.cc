// ladder-example-bench: a benchmark program of ladder's own that meets the command runner's
// result contract, for matrices/examples/command-cpu.yaml and docs/command-runner.md.
//
// It times sorting `--size` random 64-bit integers with one of three algorithms, `--rounds`
// times, and prints one JSON line per round on stdout:
//   {"metric": "time_us", "value": 812.5, "round": 0}
// plus one {"evidence": {...}} line saying what it ran. Anything else it prints is ignored by
// ladder. Exit status 0 on success, 2 on bad arguments. With --count-comparisons it also prints
// {"metric": "comparisons", ...} per round: the comparisons the sort made, a measure of its work
// that no load on the machine moves (the history test reads it on a busy CI machine). With
// --sorts K each round sorts K fresh copies of its data (the value is their total time), so a
// build that does a known share more work can be planted: ladder-example-bench-slow10 sorts
// K + K/10 copies, exactly 10 % more work at --sorts 10 (the one-host bench, docs/statistics.md).
//
//   ladder-example-bench --method std_sort --size 100000 --rounds 3 [--sorts K]
//                        [--count-comparisons]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

int Usage(const char* why) {
  std::fprintf(stderr,
               "ladder-example-bench: %s\n"
               "usage: ladder-example-bench --method std_sort|stable_sort|heap_sort --size N "
               "[--rounds R] [--seed S] [--sorts K] [--count-comparisons]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string method = "std_sort";
  long long size = 100000;
  long long rounds = 1;
  unsigned long long seed = 1;
  bool count_comparisons = false;
  long long sorts_asked = 1;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--method") == 0 && has_value) {
      method = argv[++i];
    } else if (std::strcmp(argv[i], "--size") == 0 && has_value) {
      size = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && has_value) {
      rounds = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--seed") == 0 && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--sorts") == 0 && has_value) {
      sorts_asked = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--count-comparisons") == 0) {
      count_comparisons = true;
    } else {
      return Usage((std::string("unknown argument ") + argv[i]).c_str());
    }
  }
  if (size < 1 || size > 100000000) return Usage("--size: 1 to 100000000");
  if (rounds < 1 || rounds > 100000) return Usage("--rounds: 1 to 100000");
  if (sorts_asked < 1 || sorts_asked > 1000) return Usage("--sorts: 1 to 1000");
  if (method != "std_sort" && method != "stable_sort" && method != "heap_sort") {
    return Usage("--method: std_sort, stable_sort or heap_sort");
  }
  std::printf("{\"evidence\": {\"method\": \"%s\", \"size\": %lld, \"compiler\": \"%s\"}}\n",
              method.c_str(), size, __VERSION__);
  std::mt19937_64 random(seed);
  std::vector<uint64_t> data(static_cast<size_t>(size));
  // The planted regression of docs/history.md (ladder-example-bench-slow): this build sorts
  // every round's data three times over (twice more from the same unsorted copy), real work on
  // the CPU as a slower sort's would be: 3x the time and 3x the comparisons.
#ifdef LADDER_EXAMPLE_PLANTED_SLOWDOWN
  constexpr int kSorts = 3;
#else
  constexpr int kSorts = 1;
#endif
  // ladder-example-bench-slow10: a tenth more sorts than asked (11 at --sorts 10).
#ifdef LADDER_EXAMPLE_PLANTED_EXTRA_PERCENT
  constexpr long long kExtraPercent = LADDER_EXAMPLE_PLANTED_EXTRA_PERCENT;
#else
  constexpr long long kExtraPercent = 0;
#endif
  const long long passes = sorts_asked * kSorts + sorts_asked * kExtraPercent / 100;
  std::printf("{\"evidence\": {\"sorts\": %lld}}\n", passes);
  std::vector<uint64_t> unsorted;
  for (long long round = 0; round < rounds; ++round) {
    for (auto& x : data) x = random();
    if (passes > 1) unsorted = data;
    uint64_t comparisons = 0;
    auto less = [&comparisons, count_comparisons](uint64_t a, uint64_t b) {
      if (count_comparisons) ++comparisons;
      return a < b;
    };
    const auto start = std::chrono::steady_clock::now();
    for (long long pass = 0; pass < passes; ++pass) {
      // Every pass of several copies its input, so K passes are K times one pass's work.
      if (passes > 1 && (pass > 0 || sorts_asked > 1 || kExtraPercent > 0)) data = unsorted;
      if (method == "std_sort") {
        std::sort(data.begin(), data.end(), less);
      } else if (method == "stable_sort") {
        std::stable_sort(data.begin(), data.end(), less);
      } else {
        std::make_heap(data.begin(), data.end(), less);
        std::sort_heap(data.begin(), data.end(), less);
      }
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!std::is_sorted(data.begin(), data.end())) {
      std::fprintf(stderr, "ladder-example-bench: the result is not sorted\n");
      return 1;
    }
    std::printf("{\"metric\": \"time_us\", \"value\": %.3f, \"round\": %lld}\n", us, round);
    if (count_comparisons) {
      std::printf("{\"metric\": \"comparisons\", \"value\": %llu, \"round\": %lld}\n",
                  static_cast<unsigned long long>(comparisons), round);
    }
  }
  return 0;
}
