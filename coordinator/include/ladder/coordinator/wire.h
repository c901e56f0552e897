// The admin service's messages built from the database's rows, in one place, so what the
// coordinator serves and what the CLI reads offline from a copied file (`--db`) show the same
// fields the same way.
#pragma once

#include "ladder/db/query.h"
#include "ladder/v1/admin.pb.h"

namespace ladder::coordinator {

// Every stored field, and an ETA from the mean duration of the run's done units over the units
// leased now: 0 once finished, -1 (unknown) before any unit is done. The coordinator adds the
// waiting reason, which only it knows (who is connected).
void FillRunSummary(const db::RunSummary& summary, v1::RunSummary* out);
void FillSessionInfo(const db::SessionSummary& session, v1::SessionInfo* out);

}  // namespace ladder::coordinator
