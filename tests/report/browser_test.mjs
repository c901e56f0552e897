// Loads a ladder report in Debian's chromium (headless, through playwright-core) and checks what
// a reader meets: one chart point per compared cell (by data-cell), a tooltip on hover that
// names the cell and both arms, and no errors logged by the page.
//
//   node browser_test.mjs REPORT.html CELLS.json
// CELLS.json: a JSON array of the cell keys that must each have exactly one point.
// Exit codes: 0 pass, 1 fail, 77 skip (chromium or playwright-core unavailable).
import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const SKIP = 77;
const [reportPath, cellsPath] = process.argv.slice(2);
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
const failures = [];
const errors = [];
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
} finally {
  await browser.close();
}
for (const e of errors) failures.push(e);
if (failures.length) {
  console.error('FAIL:\n  ' + failures.join('\n  '));
  process.exit(1);
}
console.log(`PASS: ${expected.length} points, tooltip shown and hidden, no page errors`);
