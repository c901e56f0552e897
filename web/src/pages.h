// The pages' HTML, CSS and scripts, embedded. Private to web/.
#pragma once

#include <string>
#include <vector>

namespace ladder::web {

// Each page is a shell whose script polls /api and renders with textContent (never innerHTML
// with data), so nothing an agent or a matrix wrote can run in the viewer's browser.
std::string RunsPage();
std::string RunPage(int64_t run_id);
std::string FleetPage();
std::string SessionPage(const std::string& session_id);

// A matrix's history, rendered on the server: `fragment` is report::RenderHistoryFragment's
// HTML (escaped there), `style` the charts' CSS; `notes` plain text (escaped here).
std::string MatrixPage(const std::string& matrix_name, const std::string& fragment,
                       const std::string& style, const std::vector<std::string>& notes);

// A banner put at the top of the report's page while its run is not done.
std::string ProvisionalBanner(int64_t cells_done, int64_t cells_total);

}  // namespace ladder::web
