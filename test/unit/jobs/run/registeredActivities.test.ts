/**
 * The job orchestrations refuse to run on a deployment without their activities
 * (shared/jobs/run/registeredActivities.ts): a name never registered, or disabled by the Functions
 * host's app setting, fails the run before it yields anything; a registered one lets it run.
 * (test/e2e/missingActivity.test.ts shows the whole job failing on both hosts.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type OrchestrationContext, type OrchestrationHandler } from 'durable-functions';

import { disabledBySetting, missingActivities, registerJobActivity, requiringActivities } from '../../../../shared/jobs/run/registeredActivities';

describe('registered job activities', () => {
  registerJobActivity('regTestPresent', () => 'ok');

  it('names the activities that are not registered, or that an AzureWebJobs.<name>.Disabled setting disables', () => {
    assert.deepEqual(missingActivities(['regTestPresent', 'regTestAbsent'], {}), ['regTestAbsent']);
    assert.deepEqual(missingActivities(['regTestPresent'], { 'AzureWebJobs.regTestPresent.Disabled': 'true' }), ['regTestPresent']);
    assert.deepEqual(missingActivities(['regTestPresent'], { AzureWebJobs__regTestPresent__Disabled: '1' }), ['regTestPresent']);
    assert.deepEqual(missingActivities(['regTestPresent'], { 'AzureWebJobs.regTestPresent.Disabled': 'false' }), []);
    assert.equal(disabledBySetting('x', { 'AzureWebJobs.x.Disabled': ' TRUE ' }), true);
    assert.equal(disabledBySetting('x', { 'AzureWebJobs.x.Disabled': '0' }), false);
  });

  it('fails the orchestration before its first action when one is missing, and runs it when none is', () => {
    let ran = 0;
    // eslint-disable-next-line require-yield -- an orchestration that ends at once shows whether it ran
    const inner: OrchestrationHandler = function* () {
      ran += 1;
      return 'done';
    };
    const context = {} as OrchestrationContext;
    const refused = requiringActivities(['regTestPresent', 'regTestAbsent'], inner)(context);
    assert.throws(() => refused.next(), /^Error: ACTIVITY_MISSING: this deployment has no 'regTestAbsent' activity/);
    assert.equal(ran, 0, 'the job orchestration itself never began');
    const allowed = requiringActivities(['regTestPresent'], inner)(context);
    assert.deepEqual(allowed.next(), { value: 'done', done: true });
    assert.equal(ran, 1);
  });
});
