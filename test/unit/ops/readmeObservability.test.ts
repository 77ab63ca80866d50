/**
 * The Observability section (docs/operations.md) against the app's event catalogue
 * (shared/observability/events.ts, which test/e2e/observability.test.ts holds the real output to):
 * every Kusto query reads only events that exist and fields those events carry, and the events
 * table lists every event with fields that exist. A renamed field fails here, not on a dashboard.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { OPERATOR_EVENTS } from '../../../shared/observability/events';

const readme = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'operations.md'), 'utf8');
const section = readme.slice(readme.indexOf('### Observability (Application Insights)'), readme.indexOf('<!-- /section:operate -->'));

function fieldsOf(event: string): Set<string> {
  const spec = OPERATOR_EVENTS[event];
  return new Set([...Object.keys(spec?.fields ?? {}), ...Object.keys(spec?.optional ?? {})]);
}

describe('docs/operations.md observability section', () => {
  const queries = [...section.matchAll(/```kusto\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');

  it('has the queries operators asked for', () => {
    for (const title of ['Who led when', 'Failovers in the last day', 'Jobs by status', 'Slowest chunks']) assert.ok(section.includes(`**${title}`), title);
    assert.ok(queries.length >= 4, `${queries.length} kusto blocks`);
  });

  it('every query names real events and reads only fields those events carry', () => {
    for (const query of queries) {
      const events = [...query.matchAll(/'"event":"([a-z._]+)"'/g)].map((m) => m[1] ?? '');
      assert.ok(events.length > 0, `a query without an event filter:\n${query}`);
      for (const event of events) assert.ok(event in OPERATOR_EVENTS, `the query reads ${event}, which the app does not emit:\n${query}`);
      const allowed = new Set(events.flatMap((e) => [...fieldsOf(e)]));
      for (const [, field] of query.matchAll(/\be\.([A-Za-z]+)/g)) {
        if (field === 'event') continue;
        assert.ok(allowed.has(field ?? ''), `the query reads e.${field}, which ${events.join(', ')} do not carry:\n${query}`);
      }
    }
  });

  it('the events table lists every catalogued event with its level and existing fields', () => {
    const rows = section.split('\n').filter((l) => /^\| `[a-z]+\.[a-z_]+` \|/.test(l));
    const listed = new Map(rows.map((r) => [/^\| `([^`]+)`/.exec(r)?.[1] ?? '', r.split('|').map((c) => c.trim())]));
    assert.deepEqual([...listed.keys()].sort(), Object.keys(OPERATOR_EVENTS).sort());
    for (const [event, cells] of listed) {
      assert.equal(cells[2], OPERATOR_EVENTS[event]?.level, `${event} level`);
      const named = [...(cells[4] ?? '').replace(/\([^)]*\)/g, '').matchAll(/`([A-Za-z]+)`/g)].map((m) => m[1] ?? '');
      for (const field of named) assert.ok(fieldsOf(event).has(field), `${event}: the table lists ${field}, which the event does not carry`);
      for (const field of Object.keys(OPERATOR_EVENTS[event]?.fields ?? {})) if (field !== 'blob') assert.ok(named.includes(field) || field === 'leaseSeconds', `${event}: ${field} missing from the table`);
    }
  });
});
