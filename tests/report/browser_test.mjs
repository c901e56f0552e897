// Loads a ladder report in Debian's chromium (headless, through playwright-core) and checks what
// a reader meets: one chart point per compared cell (by data-cell), a tooltip on hover that
// names the cell and both arms, and no errors logged by the page.
//
//   node browser_test.mjs REPORT.html CELLS.json [LOAD.json]
// CELLS.json: a JSON array of the cell keys that must each have exactly one point.
// LOAD.json (a report of engine cells under load): {curves: [{arm, cells}], ratios: [{cell, df}]},
// the series the load charts must draw: one throughput–latency point per cell on its arm's curve,
// one ratio point per comparison with its df, each drawn with a size and a tooltip.
// Exit codes: 0 pass, 1 fail, 77 skip (chromium or playwright-core unavailable).
import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const SKIP = 77;
const [reportPath, cellsPath, loadPath] = process.argv.slice(2);
if (!reportPath || !cellsPath) {
  console.error('usage: node browser_test.mjs REPORT.html CELLS.json');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(executablePath)) {
  console.log(`SKIP: ${executablePath} not found (apt-get install chromium)`);
  process.exit(SKIP);
}
let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.log(`SKIP: playwright-core not installed (npm ci in tests/report): ${e.message}`);
  process.exit(SKIP);
}

const expected = JSON.parse(readFileSync(cellsPath, 'utf8'));
const load = loadPath ? JSON.parse(readFileSync(loadPath, 'utf8')) : null;
const failures = [];
const errors = [];
// The load charts: every expected point drawn once, on screen, in its series; ratio points
// carry their df (attribute and label); hovering a point of each chart shows its tooltip.
async function checkLoadCharts(page, load, failures) {
  for (const chart of ['svg.load-curve', 'svg.load-ratio']) {
    const box = await page.locator(chart).boundingBox();
    if (!box || box.width < 100 || box.height < 100) failures.push(`${chart}: not rendered`);
  }
  const curvePoints = await page.$$eval('svg.load-curve circle.load-point', (els) =>
    els.map((e) => ({ cell: e.getAttribute('data-cell'), arm: e.getAttribute('data-arm'),
                      r: e.getBoundingClientRect().width })));
  let n = 0;
  for (const curve of load.curves) {
    for (const cell of curve.cells) {
      ++n;
      const found = curvePoints.filter((p) => p.cell === cell);
      if (found.length !== 1) failures.push(`load-curve ${cell}: ${found.length} points`);
      else if (found[0].arm !== curve.arm) failures.push(`load-curve ${cell}: arm ${found[0].arm}, expected ${curve.arm}`);
      else if (!(found[0].r > 0)) failures.push(`load-curve ${cell}: not drawn`);
    }
  }
  if (curvePoints.length !== n) failures.push(`load-curve: ${curvePoints.length} points, expected ${n}`);
  const ratioPoints = await page.$$eval('svg.load-ratio circle.load-point', (els) =>
    els.map((e) => ({ cell: e.getAttribute('data-cell'), df: e.getAttribute('data-df') })));
  for (const { cell, df } of load.ratios) {
    const found = ratioPoints.filter((p) => p.cell === cell);
    if (found.length !== 1) failures.push(`load-ratio ${cell}: ${found.length} points`);
    // The page shows a df to 3 significant digits (Welch's df within one session is fractional).
    else if (df !== null && Number(found[0].df) !== Number(df.toPrecision(3))) {
      failures.push(`load-ratio ${cell}: df ${found[0].df}, expected ${df}`);
    }
  }
  if (ratioPoints.length !== load.ratios.length) {
    failures.push(`load-ratio: ${ratioPoints.length} points, expected ${load.ratios.length}`);
  }
  const dfLabels = await page.locator('svg.load-ratio text.df').count();
  const withDf = load.ratios.filter((r) => r.df !== null).length;
  if (dfLabels !== withDf) failures.push(`load-ratio: ${dfLabels} df labels, expected ${withDf}`);
  if ((await page.locator('svg.load-ratio line.unity').count()) !== 1) failures.push('load-ratio: no ratio-1 line');
  const tooltip = page.locator('#tooltip');
  for (const [selector, needles] of [
    ['svg.load-curve circle.load-point', ['tok/s', 'e2e p50', 'TTFT', 'concurrency']],
    ['svg.load-ratio circle.load-point', ['ratio B/A', 'df ']],
  ]) {
    if ((await page.locator(selector).count()) === 0) continue;
    try {
      // Focus rather than hover: points of two arms may overlap, and focus is how a keyboard
      // reader gets the same tooltip.
      const point = page.locator(selector).last();
      await point.focus({ timeout: 5000 });
      await tooltip.waitFor({ state: 'visible', timeout: 5000 });
      const text = await tooltip.innerText();
      console.log(`tooltip of ${selector}:\n${text}`);
      for (const needle of needles) {
        if (!text.includes(needle)) failures.push(`${selector} tooltip lacks "${needle}": ${text}`);
      }
      await point.blur();
      await tooltip.waitFor({ state: 'hidden', timeout: 5000 });
    } catch (e) {
      failures.push(`focusing ${selector}: ${e.message.split('\n')[0]}`);
    }
  }
}

let browser;
try {
  browser = await chromium.launch({
    executablePath,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
} catch (e) {
  console.log(`SKIP: chromium did not start: ${e.message}`);
  process.exit(SKIP);
}
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') errors.push(`console.${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`));
  page.on('requestfailed', (req) => errors.push(`request failed: ${req.url()}`));
  // A self-contained report makes no request besides itself.
  page.on('request', (req) => {
    if (!req.url().startsWith('file:')) errors.push(`network request: ${req.url()}`);
  });
  await page.goto(pathToFileURL(reportPath).href, { waitUntil: 'load' });

  const points = await page.$$eval('svg circle.point[data-cell]', (els) =>
    els.map((e) => e.getAttribute('data-cell')));
  for (const cell of expected) {
    const n = points.filter((p) => p === cell).length;
    if (n !== 1) failures.push(`cell ${cell}: ${n} points, expected 1`);
  }
  if (points.length !== expected.length) {
    failures.push(`${points.length} points, expected ${expected.length}`);
  }
  if (points.length > 0) {
    // Hover a point that exists (the last expected one when present).
    const cell = points.includes(expected[expected.length - 1]) ? expected[expected.length - 1]
                                                                 : points[0];
    const selector = `svg circle.point[data-cell="${cell}"]`;
    const tooltip = page.locator('#tooltip');
    if (await tooltip.isVisible()) failures.push('tooltip visible before hovering');
    let text = '';
    try {
      await page.hover(selector, { timeout: 5000 });
      await tooltip.waitFor({ state: 'visible', timeout: 5000 });
      text = await tooltip.innerText();
    } catch (e) {
      failures.push(`hovering ${cell}: ${e.message.split('\n')[0]}`);
    }
    console.log(`tooltip of ${cell}:\n${text}`);
    for (const needle of [cell, 'B ', 'A ', 'ratio B/A', 'sessions', '(n ']) {
      if (!text.includes(needle)) failures.push(`tooltip lacks "${needle}": ${text}`);
    }
    await page.mouse.move(2, 2);
    if (text) await tooltip.waitFor({ state: 'hidden', timeout: 5000 });
  }
  // The chart has its zero-gain line.
  if ((await page.locator('svg line.unity').count()) < 1) failures.push('no ratio-1 line');
  if (load) await checkLoadCharts(page, load, failures);
} finally {
  await browser.close();
}
for (const e of errors) failures.push(e);
if (load && failures.length === 0) console.log('load charts: every series drawn, tooltips shown');
if (failures.length) {
  console.error('FAIL:\n  ' + failures.join('\n  '));
  process.exit(1);
}
console.log(`PASS: ${expected.length} points, tooltip shown and hidden, no page errors`);
