// What an engine binary says it accepts: the options its own `--help` lists.
//
// A recipe table keyed by build number cannot be complete (builds without git history report
// build 0, forks and distributions differ), so the engine runner reads the binary's `--help`
// once per binary and version (engine_version.h, DetectCapabilities) and the recipe renders only
// options the binary lists, in the spelling it lists. The build number stays as evidence.
//
// llama-server prints each option as common_arg::to_string does (common/arg.cpp, the same form
// from the common_arg refactor of 2024 to b10587): its spellings joined by ", ", a space and a
// value hint, then the help text from column 40, continuation lines indented by 40 spaces:
//   -fa,   --flash-attn [on|off|auto]       set Flash Attention use ('on', 'off', or 'auto', ...
//   --spec-type none,draft-simple,...      (spellings longer than 37 columns: text on the next
//                                          line)
// Options upstream removed stay listed with the help "the argument has been removed. use ...":
// they are read as removed, never as offered.
//
// vLLM (`vllm serve --help=all`) and SGLang (`python3 -m sglang.launch_server --help`) print
// Python argparse's layout (HelpFormatter): a section title in column 0 ("options:",
// "ModelConfig:"), a group's description indented 2, each option indented 2 with its
// invocation, then the help after two or more spaces, or on the lines below, indented further:
//   --host HOST           Host name.
//   -tp TENSOR_PARALLEL_SIZE, --tensor-parallel-size TENSOR_PARALLEL_SIZE
//                         Number of tensor parallel groups.
//   --enable-prefix-caching, --no-enable-prefix-caching      (BooleanOptionalAction)
//   --speculative-algorithm {EAGLE,EAGLE3,NEXTN,STANDALONE,NGRAM}   (choices)
// Python 3.13 prints the metavar once ("-tp, --tensor-parallel-size TENSOR_PARALLEL_SIZE"):
// both forms read the same.
//
// Thread safety: values; all functions are reentrant.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ladder::engines {

struct EngineOption {
  std::vector<std::string> spellings;  // "-fa", "--flash-attn" (all of them, in --help's order)
  std::string value_hint;              // "[on|off|auto]", "N", "" for a bare flag
  std::string help;                    // the text, continuation lines joined by one space
  bool removed = false;                // "the argument has been removed" (kept for the message)
};

struct EngineCapabilities {
  std::string source;  // what was read, e.g. "llama-server --help"
  std::vector<EngineOption> options;

  // The option with this spelling, removed or not; nullptr when --help does not list it.
  const EngineOption* Find(std::string_view spelling) const;
  // Listed and not removed.
  bool Has(std::string_view spelling) const;
  // The first of `spellings` the binary offers (listed, not removed); nullopt when none is.
  std::optional<std::string> FirstOffered(std::initializer_list<std::string_view> spellings) const;
  // The values an option's hint enumerates: "[on|off|auto]" -> on, off, auto;
  // "none,draft-simple" -> none, draft-simple; "{none,layer}" -> none, layer. Empty for "N" or
  // an unlisted option.
  std::vector<std::string> Values(std::string_view spelling) const;
};

// Parses llama-server's --help. InvalidArgument when the text lists no option at all (not a
// --help: a crash message, another program), quoting its start.
absl::StatusOr<EngineCapabilities> ParseLlamaServerHelp(std::string_view help);

// Parses argparse --help output (vLLM, SGLang); `source` names what was run ("vllm serve
// --help=all"). InvalidArgument when the text lists no option beyond -h/--help (an argparse
// error, a usage line alone, a summary that needs --help=all), quoting its start.
absl::StatusOr<EngineCapabilities> ParseArgparseHelp(std::string_view help,
                                                     std::string_view source);

}  // namespace ladder::engines
