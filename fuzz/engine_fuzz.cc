// libFuzzer target: what an engine can send ladder's engine client. The input is cut into the
// pieces a socket could deliver (the first byte picks the piece size) and fed to the completion
// stream parser, then read whole as a Prometheus exposition and as a `--version` output. Any
// bytes must give a result or a status, never a crash, a hang or an exception; and every message
// a status carries must be valid UTF-8 (it becomes JSON evidence and a protobuf string).
// Seeds (fuzz/corpus/engine/): streams, /metrics and version text recorded from a real
// llama-server b10309 (tests/engines/fixtures/), and SGLang's sglext chunk.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ladder/common/utf8.h"
#include "ladder/engines/client.h"
#include "ladder/engines/engine_version.h"
#include "ladder/engines/prometheus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  ladder::engines::CompletionStreamParser parser("http://fuzz", 64);
  double t = 0;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    if (!parser.Feed(bytes.substr(i, piece), t += 1)) break;
  }
  auto result = parser.Finish(t + 1);
  if (!result.ok() && !ladder::IsValidUtf8(std::string(result.status().message()))) std::abort();
  if (result.ok() && result->completion_tokens < 0) std::abort();
  auto plain = ladder::engines::CompletionStreamParser("http://fuzz", 8).FinishPlain(bytes, 1);
  if (!plain.ok() && !ladder::IsValidUtf8(std::string(plain.status().message()))) std::abort();
  (void)ladder::engines::ParsePrometheusText(bytes);
  for (const char* engine : {"vllm", "sglang", "llama.cpp"}) {
    auto version = ladder::engines::ParseEngineVersion(engine, bytes);
    if (!version.ok() && !ladder::IsValidUtf8(std::string(version.status().message()))) {
      std::abort();
    }
  }
  return 0;
}
