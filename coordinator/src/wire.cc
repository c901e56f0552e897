#include "ladder/coordinator/wire.h"

#include <algorithm>
#include <string>

namespace ladder::coordinator {

void FillRunSummary(const db::RunSummary& s, v1::RunSummary* out) {
  out->set_run_id(s.run_id);
  out->set_matrix_name(s.matrix_name);
  out->set_state(std::string(db::ToString(s.state)));
  out->set_cells_total(s.cells_total);
  out->set_cells_done(s.cells_done);
  out->set_cells_failed(s.cells_failed);
  out->set_units_total(s.units_total);
  out->set_units_done(s.units_done);
  out->set_units_leased(s.units_leased);
  out->set_units_queued(s.units_queued);
  out->set_units_failed(s.units_failed);
  out->set_measurements(s.measurements);
  out->set_created_at_ms(s.created_at_ms);
  out->set_finished_at_ms(s.finished_at_ms);
  out->set_matrix_sha256(s.matrix_sha256);
  for (const auto& r : s.failure_reasons) out->add_failure_reasons(r);
  const int64_t remaining = s.units_queued + s.units_leased;
  if (db::IsFinished(s.state)) {
    out->set_eta_seconds(0);
  } else if (s.mean_unit_seconds > 0) {
    // Units run in parallel roughly as many as are leased now.
    const double parallel = static_cast<double>(std::max<int64_t>(1, s.units_leased));
    out->set_eta_seconds(static_cast<double>(remaining) * s.mean_unit_seconds / parallel);
  } else {
    out->set_eta_seconds(-1);
  }
}

void FillSessionInfo(const db::SessionSummary& s, v1::SessionInfo* out) {
  out->set_session_id(s.session_id);
  out->set_hostname(s.hostname);
  out->set_state(std::string(db::ToString(s.state)));
  out->set_started_at_ms(s.started_at_ms);
  out->set_last_seen_ms(s.last_seen_ms);
  out->set_inventory_json(s.inventory.dump());
  out->set_attempts_done(s.attempts_done);
  out->set_attempts_live(s.attempts_live);
  out->set_attempts_failed(s.attempts_failed);
}

}  // namespace ladder::coordinator
