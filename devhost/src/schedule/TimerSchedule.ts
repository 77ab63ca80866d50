/**
 * Timer schedules as the Functions timer trigger reads them: an NCRONTAB expression with six fields
 * (second minute hour day month day-of-week; five fields mean second 0), or a TimeSpan
 * (`hh:mm:ss` / `d.hh:mm:ss`) for a constant interval. Always UTC: the dev host does not read
 * WEBSITE_TIME_ZONE.
 *
 * NCRONTAB semantics kept: `*`, lists, ranges, steps (`*∕n`, `a-b/n`, `a/n` = from a to the end),
 * month and weekday names (JAN, SUN...), day-of-week 0-6 with 0 = Sunday, and day-of-month and
 * day-of-week both having to match when both are restricted (NCRONTAB's rule, unlike Vixie cron's
 * "either"). A bad expression fails with `DEVHOST_BAD_SCHEDULE` naming what is wrong.
 * Why not cron-parser (5.10.6, which reads six fields): of this parser's test cases it gives the
 * same next occurrence for 7 of 8 but keeps Vixie's "either" for day and day-of-week, so
 * `0 0 0 13 * FRI` fires every Friday and every 13th (2026-01-02, 01-09, 01-13) where the Functions
 * host fires on Friday the 13th only (2026-02-13); its strict mode refuses the pair instead. It also
 * takes what NCRONTAB refuses: four fields, and 7 for Sunday.
 */
import { DevHostError } from '../errors';

export interface TimerSchedule {
  /** The first occurrence strictly after `after` (milliseconds are dropped: occurrences are whole seconds). */
  next(after: Date): Date;
  /** True when occurrences can be more than one minute apart (the host keeps a schedule status only then). */
  readonly monitorable: boolean;
  readonly expression: string;
}

interface FieldSpec {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  readonly names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'] },
  { name: 'day-of-week', min: 0, max: 6, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'] },
];

function bad(expression: string, why: string): DevHostError {
  return new DevHostError('DEVHOST_BAD_SCHEDULE', `The schedule expression "${expression}" was not recognized as a valid NCRONTAB expression or TimeSpan: ${why}.`, true);
}

function parseValue(text: string, spec: FieldSpec, expression: string): number {
  const upper = text.toUpperCase();
  const named = spec.names?.indexOf(upper) ?? -1;
  if (named >= 0) return spec.min + named;
  if (!/^\d+$/.test(text)) throw bad(expression, `"${text}" is not a value for the ${spec.name} field`);
  const value = Number(text);
  if (value < spec.min || value > spec.max) throw bad(expression, `${value} is outside ${spec.min}-${spec.max} for the ${spec.name} field`);
  return value;
}

function parseField(text: string, spec: FieldSpec, expression: string): { values: Set<number>; wildcard: boolean } {
  const values = new Set<number>();
  let wildcard = false;
  for (const part of text.split(',')) {
    if (part === '') throw bad(expression, `empty list item in the ${spec.name} field`);
    const [rangeText, stepText, extra] = part.split('/');
    if (extra !== undefined || rangeText === undefined || rangeText === '') throw bad(expression, `"${part}" in the ${spec.name} field`);
    let step = 1;
    if (stepText !== undefined) {
      if (!/^\d+$/.test(stepText) || Number(stepText) === 0) throw bad(expression, `step "${stepText}" in the ${spec.name} field`);
      step = Number(stepText);
    }
    let from: number;
    let to: number;
    if (rangeText === '*') {
      from = spec.min;
      to = spec.max;
      if (stepText === undefined) wildcard = true;
    } else if (rangeText.includes('-')) {
      const [a, b, more] = rangeText.split('-');
      if (a === undefined || b === undefined || more !== undefined) throw bad(expression, `range "${rangeText}" in the ${spec.name} field`);
      from = parseValue(a, spec, expression);
      to = parseValue(b, spec, expression);
      if (from > to) throw bad(expression, `range "${rangeText}" runs backwards in the ${spec.name} field`);
    } else {
      from = parseValue(rangeText, spec, expression);
      to = stepText === undefined ? from : spec.max;
    }
    for (let v = from; v <= to; v += step) values.add(v);
  }
  return { values, wildcard };
}

class CronSchedule implements TimerSchedule {
  readonly monitorable: boolean;
  readonly #seconds: Set<number>;
  readonly #minutes: Set<number>;
  readonly #hours: Set<number>;
  readonly #days: Set<number>;
  readonly #months: Set<number>;
  readonly #weekdays: Set<number>;

  constructor(
    readonly expression: string,
    fields: ReadonlyArray<{ values: Set<number>; wildcard: boolean }>,
  ) {
    const [s, m, h, d, mo, w] = fields;
    if (s === undefined || m === undefined || h === undefined || d === undefined || mo === undefined || w === undefined) throw bad(expression, 'wrong number of fields');
    this.#seconds = s.values;
    this.#minutes = m.values;
    this.#hours = h.values;
    this.#days = d.values;
    this.#months = mo.values;
    this.#weekdays = w.values;
    // Like the host's ShouldDisableScheduleMonitor: only "X * * * * *" with several seconds a minute is sub-minute.
    const subMinute = m.wildcard && h.wildcard && d.wildcard && mo.wildcard && w.wildcard && s.values.size > 1;
    this.monitorable = !subMinute;
    // A schedule that can never fire (e.g. 30 February) fails now, not at the first tick.
    this.next(new Date(Date.UTC(2000, 0, 1)));
  }

  next(after: Date): Date {
    const t = new Date(Math.floor(after.getTime() / 1000) * 1000 + 1000);
    const limit = after.getTime() + 8 * 366 * 24 * 3600 * 1000;
    while (t.getTime() <= limit) {
      if (!this.#months.has(t.getUTCMonth() + 1)) {
        t.setUTCMonth(t.getUTCMonth() + 1, 1);
        t.setUTCHours(0, 0, 0, 0);
        continue;
      }
      if (!this.#days.has(t.getUTCDate()) || !this.#weekdays.has(t.getUTCDay())) {
        t.setUTCDate(t.getUTCDate() + 1);
        t.setUTCHours(0, 0, 0, 0);
        continue;
      }
      if (!this.#hours.has(t.getUTCHours())) {
        t.setUTCHours(t.getUTCHours() + 1, 0, 0, 0);
        continue;
      }
      if (!this.#minutes.has(t.getUTCMinutes())) {
        t.setUTCMinutes(t.getUTCMinutes() + 1, 0, 0);
        continue;
      }
      if (!this.#seconds.has(t.getUTCSeconds())) {
        t.setUTCSeconds(t.getUTCSeconds() + 1, 0);
        continue;
      }
      return t;
    }
    throw bad(this.expression, 'it has no occurrence');
  }
}

class ConstantSchedule implements TimerSchedule {
  readonly monitorable: boolean;
  constructor(
    readonly expression: string,
    private readonly intervalMs: number,
  ) {
    this.monitorable = intervalMs >= 60_000;
  }

  next(after: Date): Date {
    return new Date(after.getTime() + this.intervalMs);
  }
}

/** `[d.]hh:mm[:ss[.fff]]` as .NET's TimeSpan.Parse reads the common forms; undefined when not one. */
export function parseTimeSpanMs(text: string): number | undefined {
  const match = /^(?:(\d+)\.)?(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,7}))?)?$/.exec(text.trim());
  if (match === null) return undefined;
  const [, days, hours, minutes, seconds, fraction] = match;
  const h = Number(hours);
  const m = Number(minutes);
  const s = Number(seconds ?? '0');
  if (h > 23 || m > 59 || s > 59) return undefined;
  const ms = fraction === undefined ? 0 : Math.round(Number(`0.${fraction}`) * 1000);
  return (((Number(days ?? '0') * 24 + h) * 60 + m) * 60 + s) * 1000 + ms;
}

export function parseTimerSchedule(expression: string): TimerSchedule {
  const text = expression.trim();
  const parts = text.split(/\s+/);
  if (parts.length === 6 || parts.length === 5) {
    const withSeconds = parts.length === 5 ? ['0', ...parts] : parts;
    const fields = withSeconds.map((part, i) => parseField(part, FIELDS[i] as FieldSpec, expression));
    return new CronSchedule(text, fields);
  }
  const intervalMs = parseTimeSpanMs(text);
  if (intervalMs !== undefined) {
    if (intervalMs <= 0) throw bad(expression, 'the interval must be positive');
    return new ConstantSchedule(text, intervalMs);
  }
  throw bad(expression, `expected six fields (second minute hour day month day-of-week) or a TimeSpan, got ${parts.length} field(s)`);
}
