#include "pages.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "ladder/report/report.h"

namespace ladder::web {
namespace {

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
header{background:#1b1f24;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#d0d7de;text-decoration:none}header a.here{color:#fff;font-weight:600}
header b{font-size:15px}main{padding:12px 16px;max-width:1400px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e1e4e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f1f3f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:flex;height:10px;width:220px;background:#e1e4e8;border-radius:2px;overflow:hidden}
.bar span{display:block;height:100%}.done{background:#2da44e}.leased{background:#54aeff}
.failed{background:#cf222e}.waiting{color:#9a6700}.muted{color:#57606a}
.state-done{color:#2da44e}.state-running{color:#0969da}.state-cancelled{color:#57606a}
.state-lost{color:#cf222e}.state-gone{color:#57606a}.state-active{color:#2da44e}
iframe{width:100%;height:75vh;border:1px solid #e1e4e8;background:#fff}
#error{color:#cf222e}
)css";

// Shared helpers: el() builds elements with text only; poll() re-runs `render` every 2 s.
constexpr const char* kScript = R"js(
function el(tag, text, cls){const e=document.createElement(tag);
  if(text!==undefined&&text!==null)e.textContent=String(text);if(cls)e.className=cls;return e;}
function link(href,text){const a=el('a',text);a.href=href;return a;}
function when(ms){return ms>0?new Date(Number(ms)).toLocaleString():'';}
function eta(s){s=Number(s);if(!(s>=0))return '';if(s<90)return Math.round(s)+' s';
  if(s<5400)return Math.round(s/60)+' min';return (s/3600).toFixed(1)+' h';}
function bar(done,leased,failed,total){const b=el('div',null,'bar');total=Math.max(1,Number(total));
  for(const [n,c] of [[done,'done'],[leased,'leased'],[failed,'failed']]){
    const s=el('span',null,c);s.style.width=(100*Number(n)/total)+'%';b.appendChild(s);}return b;}
function row(cells){const tr=el('tr');for(const c of cells){const td=el('td');
  if(c instanceof Node)td.appendChild(c);else td.textContent=c===undefined?'':String(c);
  tr.appendChild(td);}return tr;}
function table(head){const t=el('table');const tr=el('tr');for(const h of head)tr.appendChild(el('th',h));
  t.appendChild(tr);return t;}
async function getJson(path){const r=await fetch(path,{credentials:'same-origin'});
  if(!r.ok)throw new Error(path+': '+r.status+' '+(await r.text()));return r.json();}
function poll(render){const go=async()=>{try{await render();document.getElementById('error').textContent='';}
  catch(e){document.getElementById('error').textContent=String(e.message||e);}};
  go();setInterval(go,2000);}
)js";

std::string Shell(const std::string& title, const std::string& here, const std::string& body,
                  const std::string& script, const std::string& style = "") {
  auto nav = [&](const char* href, const char* name) {
    return absl::StrCat("<a href=\"", href, "\"", here == name ? " class=\"here\"" : "", ">", name,
                        "</a>");
  };
  return absl::StrCat(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
      "<meta name=\"viewport\" content=\"width=device-width\"><title>", title,
      " · ladder</title><style>", kStyle, style, "</style></head><body><header><b>ladder</b>",
      nav("/", "runs"), nav("/fleet", "fleet"), "<a href=\"/metrics\">metrics</a></header><main>",
      body, "<p id=\"error\"></p></main><script>", kScript, script, "</script></body></html>");
}

}  // namespace

std::string RunsPage() {
  return Shell(
      "runs", "runs",
      "<h1>Runs</h1><p class=\"muted\">Every run this coordinator has stored, newest "
      "first; the page follows them live. Compare two: "
      "<a href=\"/compare?a=1&amp;b=2\">/compare?a=A&amp;b=B</a>.</p><div id=\"runs\"></div>",
      R"js(
poll(async()=>{const data=await getJson('/api/runs');const t=table(['run','matrix','state','progress',
  'cells done / failed / total','units done / leased / queued / failed','ETA','submitted','waiting']);
  t.id='runs-table';
  for(const r of (data.runs||[])){const tr=row([link('/runs/'+r.run_id,r.run_id),
    link('/matrices/'+encodeURIComponent(r.matrix_name),r.matrix_name),
    el('span',r.state,'state-'+r.state),bar(r.units_done,r.units_leased,r.units_failed,r.units_total),
    r.cells_done+' / '+r.cells_failed+' / '+r.cells_total,
    r.units_done+' / '+r.units_leased+' / '+r.units_queued+' / '+r.units_failed,
    r.state==='done'||r.state==='cancelled'?'':(Number(r.eta_seconds)>=0?eta(r.eta_seconds):'unknown'),
    when(r.created_at_ms),el('span',r.waiting_reason||'','waiting')]);tr.dataset.run=r.run_id;
    tr.dataset.state=r.state;t.appendChild(tr);}
  const host=document.getElementById('runs');host.replaceChildren(t);});
)js");
}

std::string RunPage(int64_t run_id) {
  const std::string id = std::to_string(run_id);
  return Shell(
      "run " + id, "runs",
      absl::StrCat("<h1 id=\"title\">Run ", id,
                   "</h1><p id=\"history\"></p><div id=\"summary\"></div><h2>Failed cells</h2><div "
                   "id=\"failed\"></div>"
                   "<h2>Results</h2><p class=\"muted\">The same page as <code>ladder report ",
                   id,
                   "</code>, redrawn as results land (at most every 10 s); every interval is "
                   "provisional until the run is done. <a href=\"/runs/",
                   id,
                   "/report\">Open it alone</a>.</p><iframe id=\"report\" src=\"about:blank\" "
                   "title=\"results\"></iframe>"),
      absl::StrCat("const RUN=", id, ";const LIVE_CELLS=2000;", R"js(
let shown=null;
poll(async()=>{const r=await getJson('/api/runs/'+RUN);
  document.getElementById('title').textContent='Run '+RUN+' · '+r.matrix_name;
  const hl=link('/matrices/'+encodeURIComponent(r.matrix_name),'History of '+r.matrix_name);
  hl.id='history-link';document.getElementById('history').replaceChildren(hl,
    el('span',': every run of this matrix, per cell, against its baseline','muted'));
  const t=table(['state','progress','cells done / failed / total','units done / leased / queued / failed',
    'measurements','ETA','waiting']);t.id='summary-table';
  const tr=row([el('span',r.state,'state-'+r.state),bar(r.units_done,r.units_leased,r.units_failed,r.units_total),
    r.cells_done+' / '+r.cells_failed+' / '+r.cells_total,
    r.units_done+' / '+r.units_leased+' / '+r.units_queued+' / '+r.units_failed,r.measurements,
    r.state==='done'||r.state==='cancelled'?'':(Number(r.eta_seconds)>=0?eta(r.eta_seconds):'unknown'),
    el('span',r.waiting_reason||'','waiting')]);tr.dataset.state=r.state;
  tr.dataset.measurements=r.measurements;t.appendChild(tr);
  document.getElementById('summary').replaceChildren(t);
  const f=el('ul');for(const reason of (r.failure_reasons||[]))f.appendChild(el('li',reason));
  if(!f.childNodes.length)f.appendChild(el('li','none','muted'));
  document.getElementById('failed').replaceChildren(f);
  // A results page of thousands of cells is megabytes: built when asked for, not live.
  const frame=document.getElementById('report');if(!frame)return;
  if(Number(r.cells_total)>LIVE_CELLS){frame.replaceWith(link('/runs/'+RUN+'/report',
    'results page ('+r.cells_total+' cells: opened on request)'));return;}
  const key=r.measurements+'/'+r.state;
  if(shown===null&&frame.src==='about:blank')frame.src='/runs/'+RUN+'/report';
  else if(shown!==null&&shown!==key)frame.src='/runs/'+RUN+'/report?'+Date.now();
  shown=key;});
)js"));
}

std::string FleetPage() {
  return Shell("fleet", "fleet",
               "<h1>Fleet</h1><p class=\"muted\">Agent sessions (one per agent process per host "
               "boot), newest last.</p><div id=\"sessions\"></div>",
               R"js(
poll(async()=>{const data=await getJson('/api/sessions');const t=table(['session','host','state','GPUs',
  'driver','ladder build','labels','attempts live','done','failed','started','last seen']);
  t.id='sessions-table';
  for(const s of (data.sessions||[])){let inv={};try{inv=JSON.parse(s.inventory_json||'{}');}catch(e){}
    const sw=inv.software||{};const gpus=(inv.gpus||[]).map(g=>g.name).join(', ')||'cpu only';
    const rt=sw.nvidia_driver||[...new Set((inv.gpus||[]).map(g=>g.driver).filter(Boolean))].join(', ');
    const engines=[sw.ladder,sw.ladder_commit&&String(sw.ladder_commit).slice(0,8),
      sw.ladder_backends&&('('+sw.ladder_backends+')')].filter(Boolean).join(' ');
    const labels=Object.entries(inv.labels||{}).map(([k,v])=>k+'='+v).join(' ');
    const tr=row([link('/sessions/'+encodeURIComponent(s.session_id),s.session_id.slice(0,8)),s.hostname,
      el('span',s.state,'state-'+s.state),gpus,rt,engines,labels,s.attempts_live||0,s.attempts_done||0,
      s.attempts_failed||0,when(s.started_at_ms),when(s.last_seen_ms)]);
    tr.dataset.session=s.session_id;t.appendChild(tr);}
  document.getElementById('sessions').replaceChildren(t);});
)js");
}

std::string SessionPage(const std::string& session_id) {
  // The id reaches the script as JSON-safe text: only [0-9a-f-] ids are routed here.
  return Shell("session", "fleet", "<h1 id=\"title\">Session</h1><div id=\"attempts\"></div>",
               absl::StrCat("const SESSION='", session_id, "';", R"js(
poll(async()=>{const data=await getJson('/api/sessions/'+SESSION+'/attempts');
  document.getElementById('title').textContent='Session '+SESSION;
  const t=table(['attempt','run','unit','cells','state','leased','ended','reason']);t.id='attempts-table';
  for(const a of data){t.appendChild(row([a.attempt_id,link('/runs/'+a.run_id,a.run_id),a.unit_index,
    a.group_key,el('span',a.state,'state-'+a.state),when(a.leased_at_ms),when(a.ended_at_ms),a.reason]));}
  document.getElementById('attempts').replaceChildren(t);});
)js"));
}

std::string MatrixPage(const std::string& matrix_name, const std::string& fragment,
                       const std::string& style, const std::vector<std::string>& notes) {
  std::string body = absl::StrCat(
      "<p class=\"muted\">The same series as <code>ladder history ",
      report::HtmlEscape(matrix_name),
      "</code> and <code>ladder report RUN --history</code>. Hover a point for its run, "
      "date, value and interval, change from the baseline and tags. Narrow it with "
      "<code>?cells=axis=value</code>, <code>?metric=</code>, <code>?baseline=NAME</code>.</p>");
  for (const auto& n : notes)
    absl::StrAppend(&body, "<p class=\"note\">", report::HtmlEscape(n), "</p>");
  absl::StrAppend(&body, "<div id=\"history\">", fragment, "</div>");
  return Shell("history " + report::HtmlEscape(matrix_name), "runs", body, "",
               absl::StrCat("section{margin:0 0 18px}h2{margin:18px 0 4px;font-size:16px}"
                            "tr.flagged td{background:#fff3f0}svg.history{border:1px solid "
                            "#e1e4e8}",
                            style));
}

std::string ProvisionalBanner(int64_t cells_done, int64_t cells_total) {
  return absl::StrCat(
      "<div id=\"provisional\" style=\"background:#fff8c5;border:1px solid #d4a72c;padding:6px "
      "10px;margin:8px;font:14px system-ui,sans-serif\"><b>Provisional.</b> The run is not done (",
      cells_done, " of ", cells_total,
      " cells): every interval and verdict below will change as results land.</div>");
}

}  // namespace ladder::web
