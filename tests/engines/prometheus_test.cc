#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ladder/engines/prometheus.h"

namespace ladder::engines {
namespace {

constexpr char kVllmMetrics[] =
    R"(# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="gemma"} 78.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="gemma"} 2.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="gemma"} 78.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="gemma"} 9.0
vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="gemma"} 1.7e9
vllm:gpu_cache_usage_perc{engine="0"} NaN
weird{path="a \"quoted\" \\ value\nnext"} +Inf 1700000000000
plain 3
)";

TEST(Prometheus, ParsesVllmCounters) {
  auto samples = ParsePrometheusText(kVllmMetrics);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 8u);
  EXPECT_EQ((*samples)[0].name, "vllm:spec_decode_num_drafts_total");
  EXPECT_EQ((*samples)[0].labels.at("model_name"), "gemma");
  EXPECT_DOUBLE_EQ((*samples)[0].value, 78.0);
  EXPECT_TRUE(std::isnan((*samples)[5].value));
  EXPECT_EQ((*samples)[6].labels.at("path"), "a \"quoted\" \\ value\nnext");
  EXPECT_TRUE(std::isinf((*samples)[6].value));
  EXPECT_EQ(SumCounter(*samples, "vllm:spec_decode_num_drafts"), 80.0);
  EXPECT_EQ(SumCounter(*samples, "vllm:spec_decode_num_accepted_tokens"), 9.0);
  EXPECT_EQ(SumCounter(*samples, "plain"), 3.0);
  EXPECT_FALSE(SumCounter(*samples, "vllm:absent").has_value());
}

TEST(Prometheus, RejectsMalformedLines) {
  for (const char* bad :
       {"name{a=\"b\" 1", "name{a=b} 1", "name", "name notanumber", "{a=\"b\"} 1", "name 1 2 3"}) {
    auto r = ParsePrometheusText(std::string("ok 1\n") + bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("line 2")) << bad;
  }
}

}  // namespace
}  // namespace ladder::engines
