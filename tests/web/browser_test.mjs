// Drives the coordinator's web pages in Debian's chromium (headless, through playwright-core):
// the runs page follows a run from submission to done, the run page's numbers match
// `ladder query`, the fleet page lists the three agents, and no page logs an error.
//
//   SUBMIT='ladder submit ...' QUERY='ladder query 1 --db ... --json' \
//     node browser_test.mjs NODE_MODULES_DIR URL [SCREENSHOT_DIR]
// Exit codes: 0 pass, 1 fail, 77 skip (chromium or playwright-core unavailable).
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const SKIP = 77;
const [modulesDir, url, shots] = process.argv.slice(2);
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
const failures = [];
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));

  // Runs: empty, then the submitted run, which ends done with all its units.
  await page.goto(url);
  await page.waitForSelector('#runs-table');
  if ((await page.locator('#runs-table tr[data-run]').count()) !== 0) failures.push('runs: not empty at start');
  execSync(process.env.SUBMIT, { stdio: 'inherit' });
  await page.waitForSelector('#runs-table tr[data-run="1"]', { timeout: 120000 });
  await page.waitForSelector('#runs-table tr[data-run="1"][data-state="done"]', { timeout: 240000 });
  const runRow = await page.locator('#runs-table tr[data-run="1"]').innerText();
  if (!runRow.includes('demo-cpu')) failures.push(`runs: row says ${runRow}`);
  if (!runRow.includes('18 / 0 / 0 / 0')) failures.push(`runs: units not all done: ${runRow}`);
  if (shots) await page.screenshot({ path: `${shots}/web-runs.png` });

  // The run: its summary, and its results (the report's page in the frame) for every cell
  // `ladder query` lists.
  const query = JSON.parse(execSync(process.env.QUERY).toString());
  await page.goto(`${url}runs/1`);
  await page.waitForSelector('#summary-table tr[data-state="done"]');
  const summary = await page.locator('#summary-table tr[data-state]').innerText();
  const cells = `${query.rows.length} / 0 / ${query.rows.length}`;
  if (!summary.includes(cells)) failures.push(`run: summary "${summary}" lacks cells ${cells}`);
  const frame = page.frameLocator('#report');
  await frame.locator('h1').first().waitFor();
  const reportText = await frame.locator('body').innerText();
  for (const row of query.rows) {
    const key = `depth=${row.group.depth}`;
    if (!reportText.includes(key)) failures.push(`run: results do not show ${key}`);
  }
  if (reportText.includes('Provisional.')) failures.push('run: done run still marked provisional');
  if (shots) await page.screenshot({ path: `${shots}/web-run.png` });

  // The fleet: the three agents, active.
  await page.goto(`${url}fleet`);
  await page.waitForSelector('#sessions-table tr[data-session]');
  const sessions = await page.locator('#sessions-table tr[data-session]').count();
  if (sessions !== 3) failures.push(`fleet: ${sessions} sessions, expected 3`);
  if (shots) await page.screenshot({ path: `${shots}/web-fleet.png` });
} catch (e) {
  failures.push(`exception: ${e.message}`);
} finally {
  await browser.close();
}
for (const f of [...failures, ...errors]) console.log(`FAIL: ${f}`);
if (failures.length || errors.length) process.exit(1);
console.log('web pages OK in chromium');
