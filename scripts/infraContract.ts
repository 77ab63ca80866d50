/**
 * What azd hands the template and what it takes back, checked against the ARM template the Bicep
 * CLI emits from infra/main.bicep (scripts/infraCheck.ts compiles it): main.parameters.json, the
 * `infra` and `services` of azure.yaml, and the outputs docs/deploy.md tells people to read.
 *
 * Guarantees, each problem reported as one line naming the file:
 * - main.parameters.json sets only parameters the template declares (exact spelling), each with a
 *   value of the parameter's type as azd passes it (azd substitutes `${VAR}` and `${VAR=default}`
 *   inside strings, then turns a string into an int or a bool for such a parameter when it parses
 *   as one), and every value it can take when its variables are unset (a literal, the `=default`)
 *   meets the parameter's allowed values and length or range bounds; azd drops an empty string
 *   for a string parameter, so the template's default applies then;
 * - every parameter without a default is set, by a literal or by a variable azd itself sets (the
 *   environment name, the location, ...), so `azd provision --no-prompt` does not stop to ask;
 * - every other variable the file reads is named in docs/deploy.md, where people learn to set it;
 * - azure.yaml provisions the file that was compiled (provider bicep, `path`/`module`), and each of
 *   its services is a resource of the type its `host` deploys to, tagged azd-service-name=<service>
 *   (how azd finds where to deploy);
 * - the outputs table of docs/deploy.md and the template's outputs name the same outputs, each a
 *   string (azd writes them to the environment: `azd env get-values`).
 * Not guaranteed: values azd reads from the environment at provision time are unknown here; only
 * their fallbacks are checked. Resource tags are read from the template's text (an expression such
 * as union(parameters('tags'), createObject('azd-service-name', 'api'))), not evaluated.
 */

/** The parts of an ARM template (as `bicep build` emits it) these checks read. */
export interface ArmTemplate {
  readonly parameters?: Readonly<Record<string, ArmParameter>>;
  readonly outputs?: Readonly<Record<string, { readonly type: string }>>;
  /** An array, or an object keyed by symbolic name (languageVersion 2.0). */
  readonly resources?: readonly ArmResource[] | Readonly<Record<string, ArmResource>>;
}

export interface ArmParameter {
  readonly type: string;
  readonly defaultValue?: unknown;
  readonly allowedValues?: readonly unknown[];
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minValue?: number;
  readonly maxValue?: number;
}

export interface ArmResource {
  readonly type: string;
  readonly tags?: unknown;
  readonly properties?: { readonly template?: ArmTemplate };
}

/** Variables azd sets itself before it reads main.parameters.json (the environment and the signed-in account). */
export const AZD_PROVIDED_VARIABLES: readonly string[] = ['AZURE_ENV_NAME', 'AZURE_LOCATION', 'AZURE_SUBSCRIPTION_ID', 'AZURE_PRINCIPAL_ID'];

/** The Azure resource type each azure.yaml `host` deploys to (the hosts this checker knows). */
export const HOST_RESOURCE_TYPES: Readonly<Record<string, string>> = {
  function: 'Microsoft.Web/sites',
  appservice: 'Microsoft.Web/sites',
  containerapp: 'Microsoft.App/containerApps',
};

const REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?:=([^}]*))?\}/g;

interface Substitution {
  readonly variable: string;
  readonly fallback: string | undefined;
}

function substitutions(text: string): Substitution[] {
  return [...text.matchAll(REFERENCE)].map((m) => ({ variable: m[1] ?? '', fallback: m[2] }));
}

/** The string azd passes when none of the variables is set (each `${VAR=x}` becomes x, each `${VAR}` empty). */
function withVariablesUnset(text: string): string {
  return text.replace(REFERENCE, (_whole, _variable: string, fallback: string | undefined) => fallback ?? '');
}

function describe(value: unknown): string {
  return JSON.stringify(value);
}

/** What azd would pass for this value to a parameter of this type, or a reason it cannot. */
function asParameterType(type: string, value: unknown): { ok: true; value: unknown } | { ok: false; reason: string } {
  const kind = type.toLowerCase();
  if (kind === 'string' || kind === 'securestring') {
    return typeof value === 'string' ? { ok: true, value } : { ok: false, reason: `expects a string, got ${describe(value)}` };
  }
  if (kind === 'int') {
    if (typeof value === 'number' && Number.isInteger(value)) return { ok: true, value };
    if (typeof value === 'string' && /^[+-]?\d+$/.test(value.trim())) return { ok: true, value: Number(value) };
    return { ok: false, reason: `expects an integer, got ${describe(value)}` };
  }
  if (kind === 'bool') {
    if (typeof value === 'boolean') return { ok: true, value };
    if (typeof value === 'string' && /^(true|false|1|0|t|f)$/i.test(value.trim())) return { ok: true, value: /^(true|1|t)$/i.test(value.trim()) };
    return { ok: false, reason: `expects a bool, got ${describe(value)}` };
  }
  if (kind === 'object' || kind === 'secureobject') {
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? { ok: true, value } : { ok: false, reason: `expects an object, got ${describe(value)}` };
  }
  if (kind === 'array') return Array.isArray(value) ? { ok: true, value } : { ok: false, reason: `expects an array, got ${describe(value)}` };
  return { ok: false, reason: `has a type this checker does not know (${type})` };
}

/** Reasons a value a parameter receives breaks its declared bounds. */
function boundsProblems(parameter: ArmParameter, value: unknown): string[] {
  const problems: string[] = [];
  if (parameter.allowedValues !== undefined && !parameter.allowedValues.some((allowed) => describe(allowed) === describe(value))) {
    problems.push(`${describe(value)} is not one of the allowed values ${describe(parameter.allowedValues)}`);
  }
  const length = typeof value === 'string' || Array.isArray(value) ? value.length : undefined;
  if (length !== undefined && parameter.minLength !== undefined && length < parameter.minLength) problems.push(`${describe(value)} is shorter than minLength ${parameter.minLength}`);
  if (length !== undefined && parameter.maxLength !== undefined && length > parameter.maxLength) problems.push(`${describe(value)} is longer than maxLength ${parameter.maxLength}`);
  if (typeof value === 'number' && parameter.minValue !== undefined && value < parameter.minValue) problems.push(`${value} is below minValue ${parameter.minValue}`);
  if (typeof value === 'number' && parameter.maxValue !== undefined && value > parameter.maxValue) problems.push(`${value} is above maxValue ${parameter.maxValue}`);
  return problems;
}

/**
 * Problems of a parameters file (its parsed JSON) against the template. `documentation` is the text
 * where the variables people set must be named (docs/deploy.md); `file` names the file in messages.
 */
export function checkParametersFile(template: ArmTemplate, parametersJson: unknown, documentation: string, file = 'infra/main.parameters.json'): string[] {
  const problems: string[] = [];
  const declared = template.parameters ?? {};
  const given = (parametersJson as { parameters?: unknown } | null)?.parameters;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) return [`${file}: no "parameters" object`];
  const entries = Object.entries(given as Record<string, unknown>);
  const variables = new Set<string>();

  for (const [name, entry] of entries) {
    const parameter = declared[name];
    if (parameter === undefined) {
      const lower = name.toLowerCase();
      const near = Object.keys(declared).filter((d) => d.toLowerCase().includes(lower) || lower.includes(d.toLowerCase()));
      problems.push(`${file}: sets "${name}", which the template does not declare${near.length === 0 ? '' : ` (it declares ${near.map((d) => `"${d}"`).join(', ')})`}`);
      continue;
    }
    if (typeof entry !== 'object' || entry === null || !('value' in entry)) {
      const isReference = typeof entry === 'object' && entry !== null && 'reference' in entry;
      const secure = /^secure/i.test(parameter.type);
      if (!(isReference && secure)) problems.push(`${file}: "${name}" has no "value"${isReference ? ' (a Key Vault reference fits only a secure parameter)' : ''}`);
      continue;
    }
    const value = entry.value;
    const references = typeof value === 'string' ? substitutions(value) : [];
    for (const reference of references) variables.add(reference.variable);

    const converted = asParameterType(parameter.type, value);
    const whole = typeof value === 'string' && references.length === 1 && /^\$\{[^}]*\}$/.test(value);
    if (!converted.ok && !(whole && /^(int|bool)$/i.test(parameter.type))) {
      problems.push(`${file}: "${name}" ${converted.reason} (the template declares ${parameter.type})`);
      continue;
    }
    // The value the deployment gets when none of its variables is set.
    const fallback = typeof value === 'string' ? withVariablesUnset(value) : value;
    const isString = /^(string|securestring)$/i.test(parameter.type);
    if (isString && fallback === '' && references.length > 0) {
      // azd drops an empty string: the template's default applies, or azd prompts when there is none.
      if (parameter.defaultValue === undefined) {
        const unset = references.filter((r) => !AZD_PROVIDED_VARIABLES.includes(r.variable)).map((r) => r.variable);
        if (unset.length > 0) problems.push(`${file}: "${name}" has no default in the template and is empty unless ${unset.join(', ')} is set: azd would stop to ask`);
      }
      continue;
    }
    if (references.length > 0 && references.every((r) => r.fallback === undefined && AZD_PROVIDED_VARIABLES.includes(r.variable))) continue;
    const fallbackValue = asParameterType(parameter.type, fallback);
    if (!fallbackValue.ok) {
      problems.push(`${file}: "${name}" ${fallbackValue.reason} when its variables are unset (the template declares ${parameter.type})`);
      continue;
    }
    for (const problem of boundsProblems(parameter, fallbackValue.value)) problems.push(`${file}: "${name}": ${problem}`);
  }

  const set = new Set(entries.map(([name]) => name));
  for (const [name, parameter] of Object.entries(declared)) {
    if (parameter.defaultValue === undefined && !set.has(name)) problems.push(`${file}: does not set "${name}", which has no default in the template: azd would stop to ask`);
  }
  for (const variable of [...variables].sort()) {
    if (!AZD_PROVIDED_VARIABLES.includes(variable) && !new RegExp(`\\b${variable}\\b`).test(documentation)) {
      problems.push(`${file}: reads the variable ${variable}, which docs/deploy.md does not mention (how would anyone know to set it?)`);
    }
  }
  return problems;
}

/** Every resource of the template and of its nested deployments' inline templates. */
export function allResources(template: ArmTemplate): ArmResource[] {
  const list = Array.isArray(template.resources) ? (template.resources as readonly ArmResource[]) : Object.values(template.resources ?? {});
  return list.flatMap((resource) => [resource, ...(resource.properties?.template === undefined ? [] : allResources(resource.properties.template))]);
}

/** True when a resource's tags (a literal object or an expression) give azd-service-name this value. */
function taggedAsService(resource: ArmResource, service: string): boolean {
  if (resource.tags === undefined) return false;
  const tags = JSON.stringify(resource.tags);
  const literal = `"azd-service-name":"${service}"`;
  const expression = `'azd-service-name', '${service}'`;
  return tags.includes(literal) || tags.includes(expression);
}

export interface AzureYaml {
  readonly infra?: { readonly provider?: string; readonly path?: string; readonly module?: string };
  readonly services?: Readonly<Record<string, { readonly host?: string } | undefined>>;
}

/**
 * Problems of azure.yaml (parsed) against the template compiled from `compiledFile`
 * (repository-relative, forward slashes).
 */
export function checkAzureYaml(template: ArmTemplate, azureYaml: AzureYaml, compiledFile: string, file = 'azure.yaml'): string[] {
  const problems: string[] = [];
  const provider = azureYaml.infra?.provider ?? 'bicep';
  if (provider !== 'bicep') problems.push(`${file}: infra.provider is ${provider}; the checked template is Bicep`);
  const path = (azureYaml.infra?.path ?? 'infra').replace(/\\/g, '/').replace(/^\.\//, '').replace(/\/$/, '');
  const provisioned = `${path}/${azureYaml.infra?.module ?? 'main'}.bicep`;
  if (provisioned !== compiledFile) problems.push(`${file}: azd provisions ${provisioned} (infra.path + infra.module), but the checked template is ${compiledFile}`);
  const resources = allResources(template);
  for (const [service, config] of Object.entries(azureYaml.services ?? {})) {
    const host = config?.host ?? '(none)';
    const type = HOST_RESOURCE_TYPES[host];
    if (type === undefined) {
      problems.push(`${file}: service ${service} has host ${host}, which this check does not know`);
      continue;
    }
    const tagged = resources.filter((r) => taggedAsService(r, service));
    if (!tagged.some((r) => r.type.toLowerCase() === type.toLowerCase())) {
      const found = tagged.map((r) => r.type).join(', ');
      problems.push(`${file}: service ${service} (host ${host}) needs a ${type} tagged azd-service-name=${service}; the template has ${found === '' ? 'none' : found}`);
    }
  }
  return problems;
}

/** The output names in the table of docs/deploy.md that follows "| Output |" (first column, in backticks). */
export function documentedOutputs(deployMd: string): string[] {
  const lines = deployMd.split(/\r?\n/);
  const header = lines.findIndex((line) => /^\|\s*Output\s*\|/.test(line));
  if (header < 0) return [];
  const names: string[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const firstCell = line.split('|')[1] ?? '';
    for (const match of firstCell.matchAll(/`([A-Z][A-Z0-9_]*)`/g)) names.push(match[1] ?? '');
  }
  return names;
}

/** Problems between the outputs docs/deploy.md documents and the template's outputs. */
export function checkDocumentedOutputs(template: ArmTemplate, deployMd: string, file = 'docs/deploy.md'): string[] {
  const documented = documentedOutputs(deployMd);
  if (documented.length === 0) return [`${file}: no outputs table (a table whose first column is headed "Output")`];
  const outputs = template.outputs ?? {};
  const problems: string[] = [];
  for (const name of documented) {
    const output = outputs[name];
    if (output === undefined) problems.push(`${file}: documents the output ${name}, which the template does not emit`);
    else if (output.type.toLowerCase() !== 'string') problems.push(`${file}: the output ${name} is a ${output.type}; azd writes outputs to the environment as strings`);
  }
  for (const name of Object.keys(outputs)) {
    if (!documented.includes(name)) problems.push(`${file}: the template emits ${name}, which the outputs table does not list`);
  }
  return problems;
}
