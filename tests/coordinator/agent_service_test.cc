// The AgentService over real loopback gRPC against a real coordinator and SQLite file: long
// polls that hold no thread (answered when work arrives, when their wait is over, when cancelled
// and at shutdown), and finishes that ride on a report. Time bounds here only tell "answered by
// the event" from "answered at the call's own deadline", with wide margins.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "ladder/coordinator/coordinator.h"
#include "ladder/v1/admin.grpc.pb.h"
#include "ladder/v1/agent.grpc.pb.h"
#include "process.h"
#include "scheduler_harness.h"

namespace ladder::coordinator {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kMatrix = R"(
name: agent-service-test
runner: kernel
axes:
  depth: [256, 512]
fixed: {backend: cpu}
replicates: {sessions: 1, processes: 1, rounds: 3}
)";

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = dir_.File("results.db");
    options.session_calls_per_second = 0;
    options.scheduler.runners = &testing::TestSchemas();
    auto started = Coordinator::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    coordinator_ = std::move(*started);
    channel_ = grpc::CreateChannel(coordinator_->address(), grpc::InsecureChannelCredentials());
    agents_ = v1::AgentService::NewStub(channel_);
    admin_ = v1::AdminService::NewStub(channel_);
  }

  void Register(const std::string& session) {
    v1::RegisterRequest request;
    request.set_session_id(session);
    request.mutable_inventory()->set_hostname("host-" + session);
    request.mutable_inventory()->add_features("kernel");
    request.mutable_inventory()->add_features("cpu");
    v1::RegisterResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(agents_->Register(&context, request, &response).ok());
  }

  void Submit() {
    v1::SubmitRequest request;
    request.set_yaml(kMatrix);
    request.set_filename("m.yaml");
    v1::SubmitResponse response;
    grpc::ClientContext context;
    auto status = admin_->Submit(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status Lease(const std::string& session, int wait_ms, v1::LeaseResponse* response,
                     grpc::ClientContext* context) {
    v1::LeaseRequest request;
    request.set_session_id(session);
    request.set_wait_ms(wait_ms);
    return agents_->Lease(context, request, response);
  }

  v1::ReportRequest ReportFor(const std::string& session, const v1::LeaseResponse& lease,
                              int values) {
    v1::ReportRequest report;
    report.set_session_id(session);
    for (int i = 0; i < values; ++i) {
      auto* m = report.add_measurements();
      m->set_uuid(session + "-" + std::to_string(lease.attempt_id()) + "-" + std::to_string(i));
      m->set_attempt_id(lease.attempt_id());
      m->set_cell_id(lease.cells(0).cell_id());
      m->set_round(i);
      m->set_metric("time_us");
      m->set_value(10 + i);
      m->set_unit("us");
    }
    return report;
  }

  ladder::testing::TempDir dir_;
  std::unique_ptr<Coordinator> coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

TEST_F(AgentServiceTest, ALongPollIsAnsweredWhenWorkArrivesNotWhenItsWaitEnds) {
  Register("session-aaaa");
  auto waiting = std::async(std::launch::async, [&] {
    v1::LeaseResponse response;
    grpc::ClientContext context;
    const auto start = steady_clock::now();
    auto status = Lease("session-aaaa", 10000, &response, &context);
    return std::make_tuple(status.ok(), response.has_work(), steady_clock::now() - start);
  });
  std::this_thread::sleep_for(milliseconds(300));
  Submit();
  auto [ok, has_work, took] = waiting.get();
  EXPECT_TRUE(ok);
  EXPECT_TRUE(has_work);
  EXPECT_LT(took, std::chrono::seconds(5)) << "the lease waited for its deadline";
}

TEST_F(AgentServiceTest, ALongPollWithNoWorkEndsEmptyAfterItsWait) {
  Register("session-aaaa");
  v1::LeaseResponse response;
  grpc::ClientContext context;
  const auto start = steady_clock::now();
  auto status = Lease("session-aaaa", 400, &response, &context);
  const auto took = steady_clock::now() - start;
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.has_work());
  EXPECT_GE(took, milliseconds(350));
  EXPECT_LT(took, std::chrono::seconds(10));  // not the client's deadline (wait + 10 s)
}

TEST_F(AgentServiceTest, CancelledAndShutDownLongPollsAreAnsweredAtOnce) {
  Register("session-aaaa");
  Register("session-bbbb");
  {
    v1::LeaseResponse response;
    grpc::ClientContext context;
    auto cancelled = std::async(std::launch::async,
                                [&] { return Lease("session-aaaa", 15000, &response, &context); });
    std::this_thread::sleep_for(milliseconds(200));
    context.TryCancel();
    EXPECT_EQ(cancelled.get().error_code(), grpc::StatusCode::CANCELLED);
  }
  v1::LeaseResponse response;
  grpc::ClientContext context;
  auto waiting = std::async(std::launch::async,
                            [&] { return Lease("session-bbbb", 15000, &response, &context); });
  std::this_thread::sleep_for(milliseconds(300));
  coordinator_->Shutdown();
  // Answered by the dispatcher, not cancelled by the server's drain deadline.
  auto status = waiting.get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("shutting down"), std::string::npos)
      << status.error_message();
}

TEST_F(AgentServiceTest, AFinishRidesOnItsReportAndWaitsForAllItsResults) {
  Register("session-aaaa");
  Submit();
  v1::LeaseResponse lease;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(Lease("session-aaaa", 1000, &lease, &context).ok());
    ASSERT_TRUE(lease.has_work());
  }
  // Announces 3 values but carries 2: the finish must wait, the results are kept.
  v1::ReportRequest early = ReportFor("session-aaaa", lease, 2);
  auto* finish = early.add_finishes();
  finish->set_attempt_id(lease.attempt_id());
  finish->set_ok(true);
  finish->set_measurement_count(3);
  v1::ReportResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(agents_->Report(&context, early, &response).ok());
  }
  EXPECT_EQ(response.acknowledged_uuids_size(), 2);
  ASSERT_EQ(response.finished_size(), 1);
  EXPECT_TRUE(response.finished(0).retry());
  EXPECT_NE(response.finished(0).detail().find("report the rest first"), std::string::npos)
      << response.finished(0).detail();

  v1::ReportRequest all = ReportFor("session-aaaa", lease, 3);
  *all.add_finishes() = *finish;
  {
    grpc::ClientContext context;
    response.Clear();
    ASSERT_TRUE(agents_->Report(&context, all, &response).ok());
  }
  EXPECT_EQ(response.acknowledged_uuids_size(), 3);  // two again (idempotent) and the third
  ASSERT_EQ(response.finished_size(), 1);
  EXPECT_FALSE(response.finished(0).retry());
  EXPECT_TRUE(response.finished(0).accepted()) << response.finished(0).detail();

  // The same finish again: the attempt is no longer live.
  {
    grpc::ClientContext context;
    response.Clear();
    ASSERT_TRUE(agents_->Report(&context, all, &response).ok());
  }
  ASSERT_EQ(response.finished_size(), 1);
  EXPECT_FALSE(response.finished(0).accepted());
  EXPECT_FALSE(response.finished(0).retry());
}

TEST_F(AgentServiceTest, AReportCannotFinishAnotherSessionsAttempt) {
  Register("session-aaaa");
  Register("session-bbbb");
  Submit();
  v1::LeaseResponse lease;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(Lease("session-aaaa", 1000, &lease, &context).ok());
    ASSERT_TRUE(lease.has_work());
  }
  // Under its own name: the attempt is not the session's, so the finish is refused.
  v1::ReportRequest report;
  report.set_session_id("session-bbbb");
  auto* finish = report.add_finishes();
  finish->set_attempt_id(lease.attempt_id());
  finish->set_ok(false);
  finish->set_failure_reason("sabotage");
  v1::ReportResponse response;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(agents_->Report(&context, report, &response).ok());
  }
  ASSERT_EQ(response.finished_size(), 1);
  EXPECT_FALSE(response.finished(0).accepted());
  // Under the owner's name inside its own report: refused outright.
  finish->set_session_id("session-aaaa");
  {
    grpc::ClientContext context;
    EXPECT_EQ(agents_->Report(&context, report, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // The owner can still finish it.
  v1::ReportRequest own = ReportFor("session-aaaa", lease, 3);
  auto* mine = own.add_finishes();
  mine->set_attempt_id(lease.attempt_id());
  mine->set_ok(true);
  mine->set_measurement_count(3);
  {
    grpc::ClientContext context;
    response.Clear();
    ASSERT_TRUE(agents_->Report(&context, own, &response).ok());
  }
  ASSERT_EQ(response.finished_size(), 1);
  EXPECT_TRUE(response.finished(0).accepted()) << response.finished(0).detail();
}

}  // namespace
}  // namespace ladder::coordinator
