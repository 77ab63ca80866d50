/** NCRONTAB and TimeSpan schedules as the Functions timer trigger reads them (UTC). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseTimerSchedule } from '../../src/schedule/TimerSchedule';

const at = (iso: string): Date => new Date(iso);
const nextIso = (expr: string, after: string): string => parseTimerSchedule(expr).next(at(after)).toISOString();

describe('parseTimerSchedule', () => {
  it('reads six fields with seconds first', () => {
    assert.equal(nextIso('*/5 * * * * *', '2026-01-01T00:00:03.500Z'), '2026-01-01T00:00:05.000Z');
    assert.equal(nextIso('*/5 * * * * *', '2026-01-01T00:00:05.000Z'), '2026-01-01T00:00:10.000Z');
    assert.equal(nextIso('0 30 9 * * *', '2026-01-01T10:00:00Z'), '2026-01-02T09:30:00.000Z');
  });

  it('reads five fields as minute-level with second 0', () => {
    assert.equal(nextIso('15 * * * *', '2026-01-01T00:20:00Z'), '2026-01-01T01:15:00.000Z');
  });

  it('understands lists, ranges, stepped ranges and names', () => {
    assert.equal(nextIso('0 0 9-17/4 * * MON-FRI', '2026-01-03T00:00:00Z'), '2026-01-05T09:00:00.000Z');
    assert.equal(nextIso('0 0 0 1 JAN,JUL *', '2026-02-01T00:00:00Z'), '2026-07-01T00:00:00.000Z');
    assert.equal(nextIso('10/20 * * * * *', '2026-01-01T00:00:31Z'), '2026-01-01T00:00:50.000Z');
  });

  it('requires both day-of-month and day-of-week when both are restricted (NCRONTAB, not Vixie cron)', () => {
    // The 13th that is a Friday: 2026-02-13 is a Friday.
    assert.equal(nextIso('0 0 0 13 * 5', '2026-01-01T00:00:00Z'), '2026-02-13T00:00:00.000Z');
  });

  it('reads a TimeSpan as a constant interval', () => {
    const schedule = parseTimerSchedule('00:00:30');
    assert.equal(schedule.next(at('2026-01-01T00:00:10Z')).toISOString(), '2026-01-01T00:00:40.000Z');
    assert.equal(schedule.monitorable, false);
    assert.equal(parseTimerSchedule('1.00:00:00').next(at('2026-01-01T00:00:00Z')).toISOString(), '2026-01-02T00:00:00.000Z');
  });

  it('keeps a schedule status only for schedules at least a minute apart (like the host)', () => {
    assert.equal(parseTimerSchedule('*/5 * * * * *').monitorable, false);
    assert.equal(parseTimerSchedule('0 * * * * *').monitorable, true);
    assert.equal(parseTimerSchedule('0 */5 * * * *').monitorable, true);
  });

  it('rejects bad expressions with a stable code and the reason', () => {
    for (const bad of ['* * * *', '60 * * * * *', '* * * * * 7', '0 0 0 30 FEB *', 'every minute', '*/0 * * * * *']) {
      assert.throws(
        () => parseTimerSchedule(bad),
        (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_SCHEDULE' && (err.message ?? '').includes(bad),
        bad,
      );
    }
  });
});
