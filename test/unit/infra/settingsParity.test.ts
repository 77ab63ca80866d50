import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import { ConfigError } from '../../../shared/config/ConfigError';
import { DEFAULTS, type Env, loadSettings, SETTING_NAMES } from '../../../shared/config/settings';
import { BicepFile, plain } from './BicepFile';
import { readRepoFile, readRepoJson, repoFilesUnder, repoPath } from './repoFiles';

/**
 * Settings the Functions host (not our code) reads, each with the page that documents it. A
 * provisioned setting must be read by the app or be on this list.
 */
const HOST_SETTINGS: Readonly<Record<string, string>> = {
  // https://learn.microsoft.com/azure/azure-functions/functions-reference#connecting-to-host-storage-with-an-identity
  AzureWebJobsStorage__blobServiceUri: 'host storage (blobs: leases, timers, Flex deployment)',
  AzureWebJobsStorage__queueServiceUri: 'host storage (queues: Durable control and work-item queues)',
  AzureWebJobsStorage__tableServiceUri: 'host storage (tables: Durable instances and history)',
  AzureWebJobsStorage__credential: 'identity-based host storage: managedidentity',
  AzureWebJobsStorage__clientId: 'identity-based host storage: which user-assigned identity',
  // https://learn.microsoft.com/azure/azure-functions/functions-app-settings#applicationinsights_connection_string
  APPLICATIONINSIGHTS_CONNECTION_STRING: 'where telemetry goes',
  // https://learn.microsoft.com/azure/azure-functions/functions-app-settings#applicationinsights_authentication_string
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Entra ID authentication for telemetry',
};

/** Settings the app reads that the Bicep must NOT set, and why. */
const NOT_PROVISIONED: Readonly<Record<string, string>> = {
  [SETTING_NAMES.instanceId]: 'app settings are shared by all instances; each derives its own id from WEBSITE_INSTANCE_ID',
  [SETTING_NAMES.callbackAllowLoopback]: 'development host only: the app refuses it on Azure',
};

/**
 * Settings read outside `loadSettings` (a module reading process.env itself), with the file that
 * reads it and its default. Keep this short: new settings belong in shared/config/settings.ts.
 */
const READ_ELSEWHERE: Readonly<Record<string, { readonly file: string; readonly fallback: string }>> = {
  COORDINATOR_LOG_LEVEL: { file: 'shared/observability/log.ts', fallback: 'info' },
};

/** Set by the platform or the OS, never by us. */
const PLATFORM_PROVIDED = new Set(['WEBSITE_INSTANCE_ID', 'WEBSITE_SITE_NAME', 'WEBSITE_HOSTNAME', 'HOSTNAME', 'COMPUTERNAME']);

/** SETTING_NAMES entries without a DEFAULTS entry, and what stands in for one (checked below). */
const DEFAULT_BY_DERIVATION: Readonly<Record<string, string>> = {
  storageConnection: `falls back to ${SETTING_NAMES.hostStorageConnection}`,
  hostStorageConnection: `not needed by the app when ${SETTING_NAMES.storageConnection} is set (the host itself requires it)`,
  instanceId: 'derived from WEBSITE_INSTANCE_ID or the host name and process id',
  callbackAllowLoopback: 'false unless set to true, and refused on Azure',
};

const CONNECTION_SETTINGS: readonly string[] = [SETTING_NAMES.storageConnection, SETTING_NAMES.hostStorageConnection];
const DEV_ENV: Env = { AzureWebJobsStorage: 'UseDevelopmentStorage=true' };

interface LocalSettings {
  readonly Values: Readonly<Record<string, string>>;
}

function withoutStorage(settings: ReturnType<typeof loadSettings>): unknown {
  // Storage and instance id differ by design between environments; everything else must match.
  return { leader: settings.leader, jobs: settings.jobs };
}

function isConnectionSetting(name: string): boolean {
  return CONNECTION_SETTINGS.some((c) => name === c || name.startsWith(`${c}__`));
}

/** True when loadSettings visibly depends on `name`: removing or corrupting it changes the outcome. */
function appReads(env: Env, name: string): boolean {
  const outcome = (e: Env): string => {
    try {
      return JSON.stringify(loadSettings(e));
    } catch (err) {
      return err instanceof ConfigError ? `ConfigError:${err.setting}` : `Error:${String(err)}`;
    }
  };
  const baseline = outcome(env);
  const without = Object.fromEntries(Object.entries(env).filter(([k]) => k !== name));
  return [without, { ...env, [name]: '!! not a valid value !!' }].some((variant) => outcome(variant) !== baseline);
}

/** What main.bicep passes to the Function App as its app settings, evaluated (default parameters unless given). */
function passedSettings(main: BicepFile): Map<string, string> {
  const appModule = main.nodesOfType('module_declaration').find((m) => m.text.includes("'app/functionApp.bicep'"));
  const params = appModule?.descendantsOfType('object_property').find((p) => p?.namedChild(0)?.text === 'params')?.namedChildren.at(-1);
  const settings = params === null || params === undefined ? undefined : BicepFile.objectProperties(params).find(([k]) => k === 'appSettings')?.[1];
  assert.ok(settings !== undefined, 'main.bicep must pass appSettings to app/functionApp.bicep');
  const value = main.evaluate(settings);
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `the app settings passed to the app cannot be evaluated: ${settings.text}`);
  return new Map(Object.entries(value).map(([k, v]) => [k, plain(v) ?? '']));
}

describe('settings parity: the app, the Bicep and local.settings.sample.json agree', () => {
  /** Every setting the template can write (the appSettings object, default parameters, empty values included). */
  let declared: Map<string, string>;
  /** The settings the app gets with the default parameters. */
  let provisioned: Map<string, string>;
  let sample: Readonly<Record<string, string>>;

  before(async () => {
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    declared = new Map([...main.evaluateObjectVariable('appSettings')].map(([k, v]) => [k, plain(v) ?? '']));
    provisioned = passedSettings(main);
    sample = readRepoJson<LocalSettings>('local.settings.sample.json').Values;
  });

  const appSettings = (): Env => Object.fromEntries(provisioned);

  it('every setting the app reads has a default (or a tested stand-in for one)', () => {
    for (const [key, name] of Object.entries(SETTING_NAMES)) {
      if (key in DEFAULTS) continue;
      assert.ok(key in DEFAULT_BY_DERIVATION, `${name} (${key}) has no entry in DEFAULTS and no stated derivation`);
    }
    // The stand-ins hold: the app starts without each of them.
    assert.doesNotThrow(() => loadSettings({ CoordinatorStorage: 'UseDevelopmentStorage=true' }));
    assert.equal(loadSettings(DEV_ENV).storageConnectionName, SETTING_NAMES.hostStorageConnection);
    assert.ok(loadSettings(DEV_ENV).instanceId.length > 0);
  });

  it('every setting the app reads is provisioned by the Bicep, or deliberately not', () => {
    const names = [...Object.values(SETTING_NAMES), ...Object.keys(READ_ELSEWHERE)];
    for (const name of names) {
      if (name in NOT_PROVISIONED) {
        assert.ok(!declared.has(name), `${name} must not be provisioned: ${NOT_PROVISIONED[name]}`);
        continue;
      }
      const present = CONNECTION_SETTINGS.includes(name) ? [...declared.keys()].some((k) => k.startsWith(`${name}__`)) : declared.has(name);
      assert.ok(present, `${name} is read by the app but infra/main.bicep does not set it (add it to appSettings, or to NOT_PROVISIONED with a reason)`);
    }
  });

  it('every setting the app reads appears in local.settings.sample.json', () => {
    for (const name of [...Object.values(SETTING_NAMES), ...Object.keys(READ_ELSEWHERE)]) {
      assert.ok(name in sample, `${name} is missing from local.settings.sample.json`);
    }
  });

  it('the provisioned values are the app defaults', () => {
    const fromBicep = loadSettings(appSettings());
    assert.deepEqual(withoutStorage(fromBicep), withoutStorage(loadSettings(DEV_ENV)));
    for (const [key, value] of Object.entries(DEFAULTS)) {
      const name = SETTING_NAMES[key as keyof typeof SETTING_NAMES];
      // Left out (its parameter is empty): the app applies this very default (asserted above).
      if (!provisioned.has(name)) assert.equal(declared.get(name), '', `${name} is neither provisioned nor an empty optional setting`);
      else assert.equal(provisioned.get(name), String(value), `${name}: Bicep default differs from DEFAULTS.${key}`);
    }
    for (const [name, { fallback }] of Object.entries(READ_ELSEWHERE)) {
      assert.equal(provisioned.get(name), fallback, `${name}: Bicep default differs from the reader's fallback`);
    }
  });

  it('local.settings.sample.json gives the app defaults', () => {
    assert.deepEqual(withoutStorage(loadSettings(sample)), withoutStorage(loadSettings(DEV_ENV)));
    for (const [name, { fallback }] of Object.entries(READ_ELSEWHERE)) assert.equal(sample[name], fallback, name);
  });

  it('the Bicep parameter bounds are the bounds the app accepts', async () => {
    // A value the template accepts must start the app, and one the app rejects should fail the
    // deployment instead of the first cold start.
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    const settingsObject = main.variables.get('appSettings');
    assert.ok(settingsObject !== undefined);
    let checked = 0;
    const starts = (name: string, value: string): boolean => {
      try {
        loadSettings({ ...DEV_ENV, [name]: value });
        return true;
      } catch (err) {
        if (err instanceof ConfigError && err.setting === name) return false;
        throw err;
      }
    };
    for (const [name, valueNode] of BicepFile.objectProperties(settingsObject)) {
      const parameter = main.parameterBehind(valueNode);
      if (parameter === undefined) continue;
      const bound = (decorator: string): number | undefined => {
        const arg = parameter.decorators.get(decorator)?.[0];
        return arg === undefined ? undefined : Number(arg);
      };
      const [minValue, maxValue, minLength, maxLength] = [bound('minValue'), bound('maxValue'), bound('minLength'), bound('maxLength')];
      if (minValue !== undefined) {
        assert.ok(starts(name, String(minValue)) && !starts(name, String(minValue - 1)), `${name}: @minValue(${minValue}) differs from the app's minimum`);
        checked++;
      }
      if (maxValue !== undefined) {
        assert.ok(starts(name, String(maxValue)) && !starts(name, String(maxValue + 1)), `${name}: @maxValue(${maxValue}) differs from the app's maximum`);
        checked++;
      }
      if (minLength !== undefined) {
        assert.ok(starts(name, 'a'.repeat(minLength)) && !starts(name, 'a'.repeat(minLength - 1)), `${name}: @minLength(${minLength}) differs from the app's rule`);
        checked++;
      }
      if (maxLength !== undefined) {
        assert.ok(starts(name, 'a'.repeat(maxLength)) && !starts(name, 'a'.repeat(maxLength + 1)), `${name}: @maxLength(${maxLength}) differs from the app's rule`);
        checked++;
      }
    }
    assert.ok(checked > 0, 'no bounded parameter feeds an app setting: this check would be vacuous');
  });

  it('the app connects to storage with the managed identity the roles are granted to', () => {
    const settings = loadSettings(appSettings());
    assert.equal(settings.storageConnectionName, SETTING_NAMES.storageConnection);
    assert.equal(settings.storage.kind, 'identity');
    if (settings.storage.kind !== 'identity') return;
    assert.equal(settings.storage.credential, 'managedidentity');
    assert.equal(settings.storage.clientId, 'identityoutputsclientid', 'CoordinatorStorage__clientId must be the user-assigned identity (identity.outputs.clientId)');
    assert.equal(settings.storage.blobServiceUri, 'https://storageoutputsname.blob.core.windows.net');
    assert.equal(settings.storage.queueServiceUri, 'https://storageoutputsname.queue.core.windows.net');
    // The host's own connection, read the same way (the app falls back to it): same identity,
    // and all three services, because Durable's Azure Storage backend uses queues and tables.
    const hostOnly = Object.fromEntries([...provisioned].filter(([k]) => !k.startsWith(`${SETTING_NAMES.storageConnection}__`)));
    const host = loadSettings(hostOnly).storage;
    assert.equal(host.kind, 'identity');
    if (host.kind !== 'identity') return;
    assert.equal(host.clientId, settings.storage.clientId);
    assert.equal(host.credential, 'managedidentity');
    assert.equal(provisioned.get('AzureWebJobsStorage__tableServiceUri'), 'https://storageoutputsname.table.core.windows.net');
    assert.equal(provisioned.get('APPLICATIONINSIGHTS_AUTHENTICATION_STRING'), 'ClientId=identityoutputsclientid;Authorization=AAD');
  });

  it('no provisioned setting is unused by the app or the host', () => {
    const env: Env = Object.fromEntries(declared);
    for (const name of declared.keys()) {
      if (name in HOST_SETTINGS) continue;
      if (name in READ_ELSEWHERE) {
        const reader = READ_ELSEWHERE[name];
        assert.ok(reader !== undefined && readRepoFile(reader.file).includes(name), `${name}: ${reader?.file} no longer reads it`);
        continue;
      }
      assert.ok(appReads(env, name), `${name} is provisioned but neither the app (loadSettings) nor the host reads it`);
    }
  });

  it('settings the host reads are provisioned only in their identity-based form', () => {
    for (const name of CONNECTION_SETTINGS) {
      assert.ok(!declared.has(name), `${name} as a connection string would need an account key: use ${name}__* settings`);
    }
    for (const name of declared.keys()) {
      assert.ok(isConnectionSetting(name) || !name.includes('__') || name in HOST_SETTINGS, `${name}: unexpected nested setting`);
    }
  });

  it('every process.env read in the app is a known setting', () => {
    const known = new Set<string>([...Object.values(SETTING_NAMES), ...Object.keys(READ_ELSEWHERE), ...PLATFORM_PROVIDED]);
    const files = [...repoFilesUnder('functions', '.ts'), ...repoFilesUnder('shared', '.ts')];
    const patterns = [/process\.env\.([A-Za-z_][A-Za-z0-9_]*)/g, /process\.env\[\s*['"]([^'"]+)['"]\s*\]/g, /readRaw\(\s*(?:process\.)?env\s*,\s*['"]([^'"]+)['"]/g];
    const unknown: string[] = [];
    for (const file of files) {
      const source = readRepoFile(file);
      for (const pattern of patterns) {
        for (const match of source.matchAll(pattern)) {
          const name = match[1];
          if (name !== undefined && !known.has(name)) unknown.push(`${file}: ${name}`);
        }
      }
    }
    assert.deepEqual(unknown, [], 'add these to SETTING_NAMES/DEFAULTS (or READ_ELSEWHERE here) so they are provisioned and documented');
  });

  it('host.json placeholders are provisioned, in the sample, and read by the app with a default', () => {
    const hostJson = readRepoFile('host.json');
    const placeholders = [...hostJson.matchAll(/%([A-Za-z0-9_]+)%/g)].map((m) => m[1] ?? '');
    assert.ok(placeholders.includes(SETTING_NAMES.taskHubName), 'host.json must take the Durable task hub from TASK_HUB_NAME');
    for (const name of placeholders) {
      assert.ok(provisioned.has(name), `host.json uses %${name}% but the Bicep does not set it`);
      assert.ok(name in sample, `host.json uses %${name}% but local.settings.sample.json lacks it`);
      assert.ok((Object.values(SETTING_NAMES) as string[]).includes(name), `%${name}% has no entry in SETTING_NAMES`);
    }
  });

  it('the runtime is node in both places: Flex functionAppConfig and the local sample', async () => {
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    const appModule = main.nodesOfType('module_declaration').find((m) => m.text.includes("'app/functionApp.bicep'"));
    assert.ok(appModule !== undefined, 'main.bicep must deploy app/functionApp.bicep');
    const params = appModule.descendantsOfType('object_property').find((p) => p?.namedChild(0)?.text === 'params')?.namedChildren.at(-1);
    assert.ok(params !== null && params !== undefined);
    const values = new Map(BicepFile.objectProperties(params).map(([k, v]) => [k, plain(main.evaluate(v))]));
    assert.equal(values.get('runtimeName'), sample.FUNCTIONS_WORKER_RUNTIME);
    assert.equal(values.get('runtimeVersion'), '22');
    // Flex Consumption rejects FUNCTIONS_WORKER_RUNTIME as an app setting.
    assert.ok(!declared.has('FUNCTIONS_WORKER_RUNTIME'));
  });

  it('no app setting is written with an empty value: an empty parameter leaves its setting out', async () => {
    for (const [name, value] of provisioned) assert.notEqual(value, '', `${name} would be written as an empty app setting`);
    const withValues = [...declared].filter(([, value]) => value !== '');
    assert.deepEqual([...provisioned].sort(), withValues.sort(), 'the app must get exactly the declared settings that have a value');
    const optional = [...declared].filter(([, value]) => value === '').map(([name]) => name);
    assert.ok(optional.length > 0, 'no setting is optional by default: this check would be vacuous');
    // Given a value, an optional setting is written.
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    const settingsObject = main.variables.get('appSettings');
    assert.ok(settingsObject !== undefined);
    for (const [name, valueNode] of BicepFile.objectProperties(settingsObject)) {
      if (!optional.includes(name)) continue;
      const parameter = main.parameterBehind(valueNode);
      assert.ok(parameter !== undefined, `${name}: an empty default must come from a parameter`);
      assert.equal(passedSettings(main.withParameters({ [parameter.name]: '7' })).get(name), '7', `${name}: a value given to ${parameter.name} must reach the app`);
    }
  });
});
