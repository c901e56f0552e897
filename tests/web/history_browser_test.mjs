// Drives a matrix's history page in Debian's chromium (headless, through playwright-core): from
// the runs page and the run page's link to /matrices/history-cpu, each cell's chart is checked
// against `ladder history --json` (history_browser_test.sh made both): one point per run at its
// value with its interval as an error bar, the baseline marked and drawn across, the run where
// the slowdown began (run 4, the planted one) and those after it highlighted, the tags in each
// point's hover text (<title>), a tag's markup shown as text and never run; then the same
// checks on the chart of `ladder report 5 --history`.
//
//   MARKUP='<script>...</script>' node history_browser_test.mjs NODE_MODULES_DIR URL \
//     HISTORY_JSON REPORT_HTML [SCREENSHOT_DIR]
// Exit codes: 0 pass, 1 fail, 77 skip (chromium or playwright-core unavailable).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const SKIP = 77;
const [modulesDir, url, historyJson, reportHtml, shots] = process.argv.slice(2);
const markup = process.env.MARKUP;
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.log(`SKIP: ${executablePath} not found`);
  process.exit(SKIP);
}
let chromium;
try {
  ({ chromium } = createRequire(`${modulesDir}/package.json`)('playwright-core'));
} catch (e) {
  console.log(`SKIP: playwright-core not installed: ${e.message}`);
  process.exit(SKIP);
}
let browser;
try {
  browser = await chromium.launch({
    executablePath, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
} catch (e) {
  console.log(`SKIP: chromium did not start: ${e.message}`);
  process.exit(SKIP);
}
const history = JSON.parse(readFileSync(historyJson, 'utf8'));
const failures = [];
const errors = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const close = (shown, value) =>
  Number.isFinite(value) && Math.abs(Number(shown) - value) <= 1e-3 * Math.abs(value) + 1e-9;

// The demo's own truth, as `ladder history` says it: baseline run 1, run 4 where it began.
check(history.baseline.run_id === 1, `history: baseline ${history.baseline.run_id}, expected 1`);
check(history.series.length === 2, `history: ${history.series.length} cells, expected 2`);
for (const s of history.series) {
  check(s.change_point && s.change_point.located && s.change_point.first_run === 4,
    `history ${s.cell}: change-point ${JSON.stringify(s.change_point)}, expected run 4`);
}
const tagsOf = new Map(history.runs.map((r) => [r.run_id,
  Object.entries(r.tags).map(([k, v]) => `${k}=${v}`).join(' ')]));

// Every chart of `page` against the history's series.
async function checkCharts(page, where) {
  const svgs = page.locator('svg.history');
  check(await svgs.count() === history.series.length,
    `${where}: ${await svgs.count()} charts, expected ${history.series.length}`);
  for (const s of history.series) {
    const svg = page.locator(`svg.history[data-cell="${s.cell}"]`);
    if (await svg.count() !== 1) { failures.push(`${where}: no chart for ${s.cell}`); continue; }
    const at = `${where} ${s.cell}`;
    const points = svg.locator('circle.history-point');
    check(await points.count() === s.points.length,
      `${at}: ${await points.count()} points, expected ${s.points.length}`);
    for (const p of s.points) {
      const point = svg.locator(`circle.history-point[data-run="${p.run_id}"]`);
      if (await point.count() !== 1) { failures.push(`${at}: no point for run ${p.run_id}`); continue; }
      check(await point.isVisible(), `${at}: run ${p.run_id}'s point not visible`);
      check(close(await point.getAttribute('data-value'), p.value),
        `${at} run ${p.run_id}: value ${await point.getAttribute('data-value')} vs ${p.value}`);
      if (p.interval) {
        check(close(await point.getAttribute('data-lower'), p.interval.lower) &&
              close(await point.getAttribute('data-upper'), p.interval.upper),
          `${at} run ${p.run_id}: interval differs from ${JSON.stringify(p.interval)}`);
        check(await svg.locator(`path.history-interval[data-run="${p.run_id}"]`).count() === 1,
          `${at} run ${p.run_id}: no error bar`);
      }
      const classes = (await point.getAttribute('class')).split(' ');
      check(classes.includes('baseline') === (p.run_id === history.baseline.run_id),
        `${at} run ${p.run_id}: baseline mark wrong (${classes})`);
      check(classes.includes('moved') === p.moved, `${at} run ${p.run_id}: moved mark wrong`);
      check(classes.includes('began') === (p.run_id === s.change_point.first_run),
        `${at} run ${p.run_id}: began mark wrong (${classes})`);
      // The hover text: the browser shows a <title> over its element.
      const title = await point.locator('title').textContent();
      check(title.includes(`run ${p.run_id}`) && title.includes(`tags: ${tagsOf.get(p.run_id)}`),
        `${at} run ${p.run_id}: hover text "${title}" lacks the run or its tags`);
      if (p.run_id === s.change_point.first_run) {
        check(title.includes('changed here: tag build: good → slow'),
          `${at}: hover text at run 4 does not say what changed: "${title}"`);
      }
    }
    check(await svg.locator(`line.history-baseline[data-run="${history.baseline.run_id}"]`).count() === 1,
      `${at}: no baseline line`);
    check(await svg.locator('rect.history-moved[data-run="4"]').count() === 1,
      `${at}: the runs from run 4 are not shaded`);
    check(await svg.locator('text.marker.began').textContent() === 'began here',
      `${at}: no "began here" mark`);
  }
  // The markup in a tag is text on the page, never a script that ran.
  check(await page.evaluate(() => window.pwned === undefined), `${where}: a tag's script ran`);
  check(await page.evaluate(() => document.querySelectorAll('svg script, table script').length === 0),
    `${where}: a tag became a script element`);
  check((await page.locator('body').innerText()).includes(markup),
    `${where}: the tag's text is not shown as text`);
}

try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));

  // The runs page links each run's matrix to its history.
  await page.goto(url);
  await page.waitForSelector('#runs-table tr[data-run="5"] a[href="/matrices/history-cpu"]');
  // The run page links to its matrix's history; follow it.
  await page.goto(`${url}runs/5`);
  await page.waitForSelector('#history-link');
  await Promise.all([page.waitForURL('**/matrices/history-cpu'), page.click('#history-link')]);
  await page.waitForSelector('svg.history');
  await checkCharts(page, 'web');
  // Hovering or focusing a point enlarges it (its <title> is the browser's tooltip).
  const hovered = page.locator('svg.history circle.history-point[data-run="4"]').first();
  await hovered.hover();
  check(await hovered.evaluate((e) => e.matches(':hover')), 'web: the point is not hovered');
  if (shots) await page.screenshot({ path: `${shots}/web-history.png`, fullPage: true });

  // Narrowed to one cell; an unknown matrix and a bad cell are refused with the reason.
  await page.goto(`${url}matrices/history-cpu?cells=size=100000`);
  check(await page.locator('svg.history').count() === 1, 'web: ?cells= did not narrow to one cell');
  const unknown = await page.request.get(`${url}matrices/no-such-matrix`);
  check(unknown.status() === 404 && (await unknown.text()).includes("no matrix named 'no-such-matrix'"),
    `web: unknown matrix answered ${unknown.status()}`);
  const badCell = await page.request.get(`${url}matrices/history-cpu?cells=size%3D7`);
  check(badCell.status() === 400, `web: a cell no run holds answered ${badCell.status()}`);

  // The same charts in `ladder report 5 --history`.
  await page.goto(`file://${reportHtml}`);
  await page.waitForSelector('svg.history');
  await checkCharts(page, 'report');
} catch (e) {
  failures.push(`exception: ${e.message}`);
} finally {
  await browser.close();
}
for (const f of [...failures, ...errors]) console.log(`FAIL: ${f}`);
if (failures.length || errors.length) process.exit(1);
console.log('history page OK in chromium');
