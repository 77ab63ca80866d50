/**
 * The allow-lists of outcome delivery (shared/jobs/delivery/DeliveryTargets.ts) and the settings
 * behind them: reply queues deny by default and never reach the app's own queues; callbacks need a
 * host on the list, https on Azure, no credentials, and no private, loopback or link-local address
 * (loopback only with the development-host setting, which Azure refuses).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../../../shared/config/ConfigError';
import { loadSettings } from '../../../../shared/config/settings';
import { DeliveryTargets, refusedAddress } from '../../../../shared/jobs/delivery/DeliveryTargets';
import { JobError } from '../../../../shared/jobs/JobError';

const BASE = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };
const SECRET = 'x'.repeat(32);

function targets(env: Record<string, string> = {}): DeliveryTargets {
  return new DeliveryTargets(loadSettings({ ...BASE, ...env }).jobs.delivery);
}

function code(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof JobError ? err.code : `not a JobError: ${String(err)}`;
  }
}

describe('outcome delivery targets', () => {
  it('reply queues: the default job-replies, names and prefixes, nothing else', () => {
    assert.equal(targets().checkReplyTo('job-replies'), 'job-replies');
    assert.equal(code(() => targets().checkReplyTo('jobs')), 'INVALID_REPLY_TO');
    const t = targets({ JOB_REPLY_QUEUES: 'replies-*, audit' });
    assert.equal(t.checkReplyTo('replies-team-a'), 'replies-team-a');
    assert.equal(t.checkReplyTo('audit'), 'audit');
    for (const bad of ['job-replies', 'Audit', 'au', 'a--b', 42, '../jobs']) assert.equal(code(() => t.checkReplyTo(bad)), 'INVALID_REPLY_TO', String(bad));
  });

  it('refuses, at start, reply queues or an outcome stream that would reach the app\'s own queues', () => {
    for (const env of [{ JOB_REPLY_QUEUES: 'jobs' }, { JOB_REPLY_QUEUES: 'work-*' }, { JOB_REPLY_QUEUES: 'coordinatorhub-*' }, { JOB_OUTCOMES_QUEUE: 'work-items' }]) {
      assert.throws(() => loadSettings({ ...BASE, ...env }), ConfigError, JSON.stringify(env));
    }
  });

  it('callbacks: off by default; a host on the list; https on Azure; no credentials; no private literal address', () => {
    assert.equal(code(() => targets().checkCallbackUrl('https://hooks.example.com/x')), 'INVALID_CALLBACK_URL');
    const t = targets({ JOB_CALLBACK_HOSTS: 'hooks.example.com,*.example.org,10.1.2.3', JOB_CALLBACK_SECRET: SECRET });
    assert.equal(t.checkCallbackUrl('https://hooks.example.com/x?t=1'), 'https://hooks.example.com/x?t=1');
    assert.equal(t.checkCallbackUrl('http://a.example.org/x'), 'http://a.example.org/x');
    for (const bad of ['https://example.org/x', 'https://evil.com/x', 'https://hooks.example.com.evil.com/', 'https://u:p@hooks.example.com/', 'ftp://hooks.example.com/', 'https://10.1.2.3/']) {
      assert.equal(code(() => t.checkCallbackUrl(bad)), 'INVALID_CALLBACK_URL', bad);
    }
    const azure = targets({ JOB_CALLBACK_HOSTS: 'hooks.example.com', JOB_CALLBACK_SECRET: SECRET, WEBSITE_SITE_NAME: 'app' });
    assert.equal(code(() => azure.checkCallbackUrl('http://hooks.example.com/x')), 'INVALID_CALLBACK_URL');
    assert.throws(() => loadSettings({ ...BASE, JOB_CALLBACK_HOSTS: 'hooks.example.com' }), ConfigError, 'a secret is required');
    assert.throws(() => loadSettings({ ...BASE, JOB_CALLBACK_ALLOW_LOOPBACK: 'true', WEBSITE_INSTANCE_ID: 'abc' }), ConfigError, 'loopback refused on Azure');
  });

  it('classifies the addresses a callback may not reach', () => {
    for (const a of ['10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '100.64.0.1', 'fd00::1', 'fc00::1']) assert.equal(refusedAddress(a), 'private', a);
    for (const a of ['169.254.169.254', 'fe80::1']) assert.equal(refusedAddress(a), 'link-local', a);
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) assert.equal(refusedAddress(a), 'loopback', a);
    assert.equal(refusedAddress('127.0.0.1', true), undefined);
    assert.equal(refusedAddress('0.0.0.0'), 'unspecified');
    for (const a of ['8.8.8.8', '172.32.0.1', '2001:db8::1', '::ffff:8.8.8.8']) assert.equal(refusedAddress(a), undefined, a);
  });
});
