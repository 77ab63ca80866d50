import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ConfigError } from '../../../shared/config/ConfigError';
import { DEFAULTS, loadSettings, SETTING_NAMES } from '../../../shared/config/settings';

const DEV = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };

function configErrorFor(env: Record<string, string>): ConfigError {
  try {
    loadSettings(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    return err;
  }
  assert.fail(`expected loadSettings to reject ${JSON.stringify(env)}`);
}

describe('settings', () => {
  it('applies every default with only a development connection', () => {
    const s = loadSettings(DEV);
    assert.equal(s.storageConnectionName, 'AzureWebJobsStorage');
    assert.deepEqual(s.storage, { kind: 'connectionString', settingName: 'AzureWebJobsStorage', connectionString: 'UseDevelopmentStorage=true' });
    assert.equal(s.leader.container, DEFAULTS.leaseContainer);
    assert.equal(s.leader.blob, DEFAULTS.leaseBlob);
    assert.equal(s.leader.leaseSeconds, 15);
    assert.equal(s.leader.renewDeadlineMs, 10_000);
    assert.equal(s.leader.retryPeriodMs, 2_000);
    assert.equal(s.leader.requestTimeoutMs, 2_000);
    assert.equal(s.leader.timerSchedule, '*/5 * * * * *');
    assert.equal(s.jobs.jobsQueue, 'jobs');
    assert.equal(s.jobs.workItemsQueue, 'work-items');
    assert.equal(s.jobs.resultsContainer, 'job-results');
    assert.equal(s.jobs.taskHubName, 'CoordinatorHub');
    assert.deepEqual(s.jobs.inputContainers, ['job-inputs']);
  });

  it('reads the job input containers as names and prefixes', () => {
    assert.deepEqual(loadSettings({ ...DEV, JOB_INPUT_CONTAINERS: ' inputs , batch-*,texts ' }).jobs.inputContainers, ['inputs', 'batch-*', 'texts']);
  });

  it('derives the renew deadline from the lease duration', () => {
    assert.equal(loadSettings({ ...DEV, LEADER_LEASE_SECONDS: '60' }).leader.renewDeadlineMs, 40_000);
  });

  it('prefers CoordinatorStorage over AzureWebJobsStorage and binds to it', () => {
    const s = loadSettings({ ...DEV, CoordinatorStorage: 'AccountName=x;AccountKey=y' });
    assert.equal(s.storageConnectionName, 'CoordinatorStorage');
    assert.equal(s.storage.kind, 'connectionString');
  });

  it('reads identity-based connections from service URIs', () => {
    const s = loadSettings({
      CoordinatorStorage__blobServiceUri: 'https://acct.blob.core.windows.net',
      CoordinatorStorage__queueServiceUri: 'https://acct.queue.core.windows.net',
      CoordinatorStorage__credential: 'managedidentity',
      CoordinatorStorage__clientId: '00000000-0000-0000-0000-000000000001',
    });
    assert.deepEqual(s.storage, {
      kind: 'identity',
      settingName: 'CoordinatorStorage',
      blobServiceUri: 'https://acct.blob.core.windows.net',
      queueServiceUri: 'https://acct.queue.core.windows.net',
      tableServiceUri: 'https://acct.table.core.windows.net',
      credential: 'managedidentity',
      clientId: '00000000-0000-0000-0000-000000000001',
    });
  });

  it('derives service URIs from an account name', () => {
    const s = loadSettings({ AzureWebJobsStorage__accountName: 'myacct' });
    assert.equal(s.storage.kind, 'identity');
    if (s.storage.kind === 'identity') {
      assert.equal(s.storage.blobServiceUri, 'https://myacct.blob.core.windows.net');
      assert.equal(s.storage.queueServiceUri, 'https://myacct.queue.core.windows.net');
    }
  });

  const bad: Array<[string, Record<string, string>, string, RegExp]> = [
    ['no storage at all', {}, 'AzureWebJobsStorage', /is not set/],
    ['a connection string that is not one', { AzureWebJobsStorage: 'hello' }, 'AzureWebJobsStorage', /not a storage connection string/],
    ['a connection string whose endpoint is not a URL', { CoordinatorStorage: 'AccountName=a;AccountKey=k;BlobEndpoint=blob-host', AzureWebJobsStorage: 'UseDevelopmentStorage=true' }, 'CoordinatorStorage', /BlobEndpoint in the connection string is not an http\(s\) URL/],
    ['a connection string without a key or SAS', { AzureWebJobsStorage: 'AccountName=a;BlobEndpoint=https://a.blob.core.windows.net' }, 'AzureWebJobsStorage', /neither AccountKey nor SharedAccessSignature/],
    ['identity without a queue URI', { CoordinatorStorage__blobServiceUri: 'https://a.blob.core.windows.net' }, 'CoordinatorStorage__queueServiceUri', /missing/],
    ['identity without a blob URI', { CoordinatorStorage__queueServiceUri: 'https://a.queue.core.windows.net' }, 'CoordinatorStorage__blobServiceUri', /missing/],
    ['a service URI that is not a URL', { CoordinatorStorage__blobServiceUri: 'nope', CoordinatorStorage__queueServiceUri: 'https://a.queue.core.windows.net' }, 'CoordinatorStorage__blobServiceUri', /not an http/],
    ['an unsupported credential', { AzureWebJobsStorage__accountName: 'acct', AzureWebJobsStorage__credential: 'password' }, 'AzureWebJobsStorage__credential', /not supported/],
    ['a bad account name', { AzureWebJobsStorage__accountName: 'Bad_Name' }, 'AzureWebJobsStorage__accountName', /not a storage account name/],
    ['a lease shorter than Azure allows', { ...DEV, LEADER_LEASE_SECONDS: '10' }, 'LEADER_LEASE_SECONDS', /15 to 60/],
    ['a lease longer than Azure allows', { ...DEV, LEADER_LEASE_SECONDS: '61' }, 'LEADER_LEASE_SECONDS', /15 to 60/],
    ['a fractional lease', { ...DEV, LEADER_LEASE_SECONDS: '15.5' }, 'LEADER_LEASE_SECONDS', /whole number/],
    ['a lease that is not a number', { ...DEV, LEADER_LEASE_SECONDS: 'soon' }, 'LEADER_LEASE_SECONDS', /not a number/],
    ['a renew deadline not below the lease', { ...DEV, LEADER_RENEW_DEADLINE_SECONDS: '15' }, 'LEADER_RENEW_DEADLINE_SECONDS', /15 must be less than LEADER_LEASE_SECONDS \(15\), so a leader steps down before its lease can expire/],
    ['a retry period not below the deadline', { ...DEV, LEADER_RETRY_PERIOD_SECONDS: '10' }, 'LEADER_RETRY_PERIOD_SECONDS', /10 must be less than LEADER_RENEW_DEADLINE_SECONDS \(10\)/],
    ['a request timeout not below the deadline', { ...DEV, LEADER_REQUEST_TIMEOUT_SECONDS: '12' }, 'LEADER_REQUEST_TIMEOUT_SECONDS', /12 must be less than LEADER_RENEW_DEADLINE_SECONDS \(10\)/],
    ['a renew deadline not below a longer lease', { ...DEV, LEADER_LEASE_SECONDS: '20', LEADER_RENEW_DEADLINE_SECONDS: '20.5' }, 'LEADER_RENEW_DEADLINE_SECONDS', /20.5 must be less than LEADER_LEASE_SECONDS \(20\)/],
    ['a pass interval the watchdog would mistake for a stall', { ...DEV, LEADER_PASS_INTERVAL_SECONDS: '200' }, 'LEADER_PASS_INTERVAL_SECONDS', /200 must be less than LEADER_STALL_TIMEOUT_SECONDS \(120\)/],
    ['a stall timeout shorter than the pass interval', { ...DEV, LEADER_PASS_INTERVAL_SECONDS: '5', LEADER_STALL_TIMEOUT_SECONDS: '3' }, 'LEADER_PASS_INTERVAL_SECONDS', /5 must be less than LEADER_STALL_TIMEOUT_SECONDS \(3\)/],
    ['an idle pass interval the watchdog would mistake for a stall', { ...DEV, LEADER_IDLE_PASS_INTERVAL_SECONDS: '120' }, 'LEADER_IDLE_PASS_INTERVAL_SECONDS', /120 must be less than LEADER_STALL_TIMEOUT_SECONDS \(120\)/],
    ['an idle pass interval below the pass interval', { ...DEV, LEADER_PASS_INTERVAL_SECONDS: '5', LEADER_IDLE_PASS_INTERVAL_SECONDS: '2' }, 'LEADER_IDLE_PASS_INTERVAL_SECONDS', /at least LEADER_PASS_INTERVAL_SECONDS/],
    ['a zero stall timeout', { ...DEV, LEADER_STALL_TIMEOUT_SECONDS: '0' }, 'LEADER_STALL_TIMEOUT_SECONDS', /out of range/],
    ['a five-field cron', { ...DEV, LEADER_TIMER_SCHEDULE: '*/5 * * * *' }, 'LEADER_TIMER_SCHEDULE', /six-field/],
    ['an uppercase container', { ...DEV, LEADER_LEASE_CONTAINER: 'Leases' }, 'LEADER_LEASE_CONTAINER', /not a valid name/],
    ['a blob name with a slash', { ...DEV, LEADER_LEASE_BLOB: '../x' }, 'LEADER_LEASE_BLOB', /not a valid name/],
    ['a queue name with underscores', { ...DEV, JOBS_QUEUE: 'my_jobs' }, 'JOBS_QUEUE', /not a valid name/],
    ['a task hub with a hyphen', { ...DEV, TASK_HUB_NAME: 'my-hub' }, 'TASK_HUB_NAME', /not a valid name/],
    ['an instance id with spaces', { ...DEV, COORDINATOR_INSTANCE_ID: 'a b' }, 'COORDINATOR_INSTANCE_ID', /must be/],
    ['input containers that include the results', { ...DEV, JOB_INPUT_CONTAINERS: 'inputs,job-results' }, 'JOB_INPUT_CONTAINERS', /app's own container "job-results"/],
    ['an input prefix that reaches the lease container', { ...DEV, JOB_INPUT_CONTAINERS: 'leader-*' }, 'JOB_INPUT_CONTAINERS', /app's own container "leader-election"/],
    ['an input prefix that reaches the host\'s containers', { ...DEV, JOB_INPUT_CONTAINERS: 'azure-*' }, 'JOB_INPUT_CONTAINERS', /reserved containers "azure-webjobs-\*"/],
    ['an input container in the task hub\'s family', { ...DEV, JOB_INPUT_CONTAINERS: 'coordinatorhub-inputs' }, 'JOB_INPUT_CONTAINERS', /reserved containers "coordinatorhub-\*"/],
    ['a bare wildcard as input container', { ...DEV, JOB_INPUT_CONTAINERS: '*' }, 'JOB_INPUT_CONTAINERS', /neither a container name/],
    ['no input container at all', { ...DEV, JOB_INPUT_CONTAINERS: ' , ' }, 'JOB_INPUT_CONTAINERS', /is empty/],
  ];
  for (const [what, env, setting, message] of bad) {
    it(`rejects ${what}, naming ${setting}`, () => {
      const err = configErrorFor(env);
      assert.equal(err.setting, setting);
      assert.equal(err.code, 'CONFIG_INVALID');
      assert.match(err.message, new RegExp(`^Setting ${setting}: `));
      assert.match(err.message, message);
    });
  }

  it('accepts timings at the edge of every rule', () => {
    const s = loadSettings({ ...DEV, LEADER_RENEW_DEADLINE_SECONDS: '14.999', LEADER_RETRY_PERIOD_SECONDS: '14.998', LEADER_REQUEST_TIMEOUT_SECONDS: '14.998', LEADER_PASS_INTERVAL_SECONDS: '119.999' });
    assert.equal(s.leader.renewDeadlineMs, 14_999);
    assert.equal(s.leader.passIntervalMs, 119_999);
  });

  it('never echoes a connection string in its error', () => {
    const err = configErrorFor({ AzureWebJobsStorage: 'AccountKey=s3cr3t' });
    assert.doesNotMatch(err.message, /s3cr3t/);
  });

  it('names every setting it reads exactly once', () => {
    const names = Object.values(SETTING_NAMES);
    assert.equal(new Set(names).size, names.length);
  });
});
