/**
 * The live page in a real browser, used as a person would: the whole app on the development host
 * (leader timer, queue worker, Durable backend, function keys on) against Azurite; a job that takes
 * a while (the test-only `slow` work type) runs for real; chromium opens /api/dashboard with a key,
 * sees the leader, its term and the instance, clicks the job, watches its progress bar move, clicks
 * Cancel, then Resubmit. What is checked is in the screenshots as well as in the DOM: the bar's
 * filled width and colours are measured in the PNG and must match the job's progress. Then the job
 * list past one page of 50, its work-type filter (and a refused one), and times in UTC.
 *
 * Set DASHBOARD_SCREENSHOT=<path> to keep the last screenshot (the report's picture).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';

import { type JobView } from '../../../shared/jobs/api/jobViews';
import { registerTestWorkTypes } from '../../fixtures/ops/testWorkTypes';
import { type Browser, hexColor, launchBrowser, Screenshot } from '../../support/browser';
import { eventually, type JobsHost, MASTER_KEY, startJobsHost } from '../jobs/support/jobsHost';

const PALETTE = { done: hexColor('#2e7d32'), failed: hexColor('#c62828'), track: hexColor('#e0e0e0') };

const i = (jobId: string): number => Number(jobId.slice(-2));

describe('the live page in a real browser (chromium, development host, Azurite)', () => {
  let h: JobsHost;
  let browser: Browser;

  before(async () => {
    registerTestWorkTypes();
    h = await startJobsHost('ui', ['*'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *', LEADER_PASS_INTERVAL_SECONDS: '1' });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await h?.stop();
  });

  interface BarMeasure {
    readonly domDone: number;
    readonly pixels: Record<string, number>;
    readonly width: number;
    readonly shot: Screenshot;
  }

  /**
   * The job detail's big bar: what the DOM says and what the screenshot shows. The page redraws
   * every second, so a measure counts only when the DOM said the same before and after the shot.
   */
  async function measureBar(): Promise<BarMeasure | undefined> {
    const bar = browser.page.locator('#job-progress .bar');
    const before = await bar.getAttribute('data-done', { timeout: 5_000 }).catch(() => null);
    const box = await bar.boundingBox({ timeout: 5_000 }).catch(() => null);
    const shot = new Screenshot(await browser.page.screenshot({ fullPage: true }));
    const after = await bar.getAttribute('data-done', { timeout: 5_000 }).catch(() => null);
    if (before === null || box === null || before !== after) return undefined;
    // The box is in viewport coordinates; the full-page shot starts at the top of the document.
    const scroll = await browser.page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY);
    const inner = { x: box.x + 2, y: box.y + scroll, width: box.width - 4, height: box.height };
    return { domDone: Number(before), pixels: shot.classifyRow(inner, PALETTE), width: inner.width, shot };
  }

  it('shows the leader, its term and the instance; a running job moves; Cancel stops it; Resubmit runs it again', async () => {
    const { page } = browser;
    const instance = h.env.COORDINATOR_INSTANCE_ID ?? '';

    // Without a key the keyed page is refused by the host, as on Azure (401, empty body).
    const refused = await browser.context.request.get(`${h.baseUrl}/api/dashboard`);
    assert.equal(refused.status(), 401);

    // 480 chunks of 2 s, up to 96 at a time (24 messages of 4 chunks): long enough for several progress polls (1 s, growing).
    const items = Array.from({ length: 480 }, () => 2_000);
    const submitted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'watch-me', workType: 'slow', items, options: { chunkSize: 1 } }));
    assert.equal(submitted.status, 202, submitted.text);

    const opened = await page.goto(`${h.baseUrl}/api/dashboard?code=${MASTER_KEY}`);
    assert.equal(opened?.status(), 200);
    const csp = opened?.headers()['content-security-policy'] ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'sha256-/);

    // Leader card, term history and instance list, as the app's storage records them.
    await page.locator('#leader dd[data-field="holder"]', { hasText: instance }).waitFor({ timeout: 30_000 });
    assert.equal(await page.locator('#leader dd[data-field="lease"]').innerText(), 'leased');
    const epoch = Number(await page.locator('#leader dd[data-field="epoch"]').innerText());
    assert.ok(epoch >= 1);
    const termRow = page.locator(`#terms tr[data-epoch="${epoch}"]`);
    await termRow.waitFor({ timeout: 30_000 });
    assert.match(await termRow.innerText(), new RegExp(`${instance}[\\s\\S]*now[\\s\\S]*leading`));
    const instanceRow = page.locator(`#instances tr[data-instance="${instance}"]`);
    await instanceRow.waitFor({ timeout: 30_000 });
    await page.locator(`#instances tr[data-instance="${instance}"] .badge.leader`).waitFor({ timeout: 30_000 });
    assert.match(await instanceRow.innerText(), /leader\s+\d+\s+alive/);

    // The job appears in the list with a bar; a person clicks it to see its detail.
    await page.locator('#jobs tr[data-job="watch-me"]').click({ timeout: 60_000 });
    await page.locator('#job-title', { hasText: 'watch-me' }).waitFor();
    await page.locator('#job .badge.running').waitFor({ timeout: 60_000 });
    // The jobs per status, from the index, above the list.
    await page.locator('#job-counts', { hasText: /\d+ jobs: .*\d+ (pending|running)/ }).waitFor({ timeout: 30_000 });

    // Progress seen moving, in the DOM and in the pixels.
    const first = await eventually(
      async () => {
        const m = await measureBar();
        return m !== undefined && m.domDone > 0 && m.domDone <= 0.8 ? m : undefined;
      },
      90_000,
      'the job to show progress',
    );
    const firstShare = (first.pixels.done ?? 0) / first.width;
    assert.ok(Math.abs(firstShare - first.domDone) < 0.03, `green share ${firstShare.toFixed(3)} of the bar vs progress ${first.domDone}`);
    assert.ok((first.pixels.track ?? 0) / first.width > 0.15, `the rest of the bar is the grey track: ${JSON.stringify(first.pixels)}`);
    assert.equal(first.pixels.failed, 0, 'no failed items, no red');
    const second = await eventually(
      async () => {
        const m = await measureBar();
        return m !== undefined && m.domDone >= first.domDone + 0.03 && m.domDone < 0.97 ? m : undefined;
      },
      90_000,
      'the progress to move on',
    );
    const secondShare = (second.pixels.done ?? 0) / second.width;
    assert.ok(Math.abs(secondShare - second.domDone) < 0.03, `green share ${secondShare.toFixed(3)} vs progress ${second.domDone}`);
    assert.ok(secondShare > firstShare + 0.02, `the green part grew in the screenshot: ${firstShare.toFixed(3)} -> ${secondShare.toFixed(3)}`);

    // Cancel, clicked.
    assert.equal(await page.locator('#cancel').isEnabled(), true);
    await page.locator('#cancel').click();
    await page.locator('#job .badge.cancelled').waitFor({ timeout: 60_000 });
    assert.equal(await page.locator('#cancel').isEnabled(), false, 'a cancelled job cannot be cancelled again');
    const cancelled = (await h.request('GET', '/api/jobs/watch-me')).json as JobView;
    assert.equal(cancelled.status, 'cancelled');
    assert.ok((cancelled.progress?.items.done ?? 0) < items.length, 'cancelled before it finished');
    const stopped = await eventually(measureBar, 10_000, 'a steady bar');
    const stoppedShare = (stopped.pixels.done ?? 0) / stopped.width;
    assert.ok(stoppedShare < 0.97 && (stopped.pixels.track ?? 0) > 0, `a cancelled job's bar stays partly grey: ${JSON.stringify(stopped.pixels)}`);
    assert.match(await page.locator('#jobs tr[data-job="watch-me"]').innerText(), /cancelled/);

    // Resubmit: the same submission runs again under a new id, and the page follows it.
    await page.locator('#resubmit').click();
    await page.locator('#job-title:not(:has-text("watch-me"))').waitFor({ timeout: 30_000 });
    const newId = ((await page.locator('#job-title').innerText()).replace(/^Job /, '')).trim();
    assert.match(newId, /^j-/);
    const again = await eventually(async () => {
      const res = await h.request('GET', `/api/jobs/${newId}/submission`);
      return res.status === 200 ? res.json : undefined;
    }, 60_000, 'the resubmitted job to start');
    const original = await h.request('GET', '/api/jobs/watch-me/submission');
    assert.deepEqual(again, original.json);
    assert.deepEqual(again, { workType: 'slow', items, options: { chunkSize: 1, attempts: 3, deadlineSeconds: 300 } });
    await page.locator(`#jobs tr[data-job="${newId}"]`).waitFor({ timeout: 30_000 });
    if (process.env.DASHBOARD_SCREENSHOT) writeFileSync(process.env.DASHBOARD_SCREENSHOT, second.shot.bytes);
    await h.request('DELETE', `/api/jobs/${newId}`);
  });

  it('pages the job list past 50, filters it by work type, says a refused filter in the list, and shows times in UTC', async () => {
    const { page } = browser;
    const ids = Array.from({ length: 55 }, (_, i) => `page-${String(i).padStart(2, '0')}`);
    for (const jobId of ids) {
      const res = await h.request('POST', '/api/jobs', JSON.stringify({ jobId, workType: i(jobId) < 2 ? 'sum' : 'noop', items: [1] }));
      assert.equal(res.status, 202, res.text);
    }
    await page.goto(`${h.baseUrl}/api/dashboard?code=${MASTER_KEY}`);
    await eventually(async () => (Number(await page.locator('#job-counts').getAttribute('data-total')) >= 57 ? true : undefined), 60_000, 'all jobs listed');
    const rows = page.locator('#jobs tbody tr.job');
    const shown = async (): Promise<string[]> => rows.evaluateAll((els) => els.map((e) => (e as unknown as { getAttribute(n: string): string }).getAttribute('data-job')));
    await page.locator('#page-label', { hasText: 'jobs 1–50 (page 1)' }).waitFor({ timeout: 30_000 });
    const first = await shown();
    assert.equal(first.length, 50);
    assert.equal(await page.locator('#newer').isEnabled(), false);
    await page.locator('#older').click();
    await page.locator('#page-label', { hasText: /jobs 51–\d+ \(page 2\)/ }).waitFor({ timeout: 30_000 });
    const second = await shown();
    assert.ok(second.length >= 7, `the rest on page 2: ${second.length}`);
    assert.deepEqual(second.filter((id) => first.includes(id)), [], 'no job on both pages');
    assert.deepEqual(ids.filter((id) => !first.includes(id) && !second.includes(id)), [], 'every job on one of the pages');
    await page.locator('#newer').click();
    await page.locator('#page-label', { hasText: 'jobs 1–50 (page 1)' }).waitFor({ timeout: 30_000 });

    // By work type: only the two sum jobs, from the first page again.
    await page.locator('#worktype-filter').fill('sum');
    await page.locator('#worktype-filter').dispatchEvent('change');
    await eventually(async () => ((await shown()).join() === 'page-01,page-00' ? true : undefined), 30_000, 'the sum jobs only');
    await page.locator('#page-label', { hasText: 'jobs 1–2 (page 1)' }).waitFor({ timeout: 10_000 });
    assert.equal(await page.locator('#older').isEnabled(), false);
    // A malformed filter: the API's code in the list; the rest of the page stays live.
    await page.locator('#worktype-filter').fill('Not A Type');
    await page.locator('#worktype-filter').dispatchEvent('change');
    await page.locator('#job-counts', { hasText: 'INVALID_WORK_TYPE_FILTER' }).waitFor({ timeout: 10_000 });
    const before = await page.locator('#live').innerText();
    await eventually(async () => ((await page.locator('#live').innerText()) !== before ? true : undefined), 10_000, 'the page to keep updating');
    assert.equal(await page.locator('#banner').isVisible(), false);
    assert.match(before, /^updated \d\d:\d\d:\d\d UTC$/);
    assert.match(await page.locator('#leader dd[data-field="since"]').innerText(), /^\d\d:\d\d:\d\d UTC \(/);
  });
});
