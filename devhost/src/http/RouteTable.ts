/**
 * HTTP trigger routing like the Functions host: each function's `route` (default: the function's
 * name) under the host.json `routePrefix`, matched case-insensitively segment by segment, with
 * parameters `{name}`, optional `{name?}` (trailing), catch-all `{*rest}`, and the constraints
 * `int`, `long`, `bool`, `guid`, `alpha`. More specific templates win (literal over constrained
 * over plain parameter over optional over catch-all).
 *
 * A path that matches a route but not its methods is "not found", as on the real host (which
 * answers 404, not 405: Azure/azure-functions-host#10098). Two functions with the same template
 * and an overlapping method fail at start with `DEVHOST_ROUTE_CONFLICT`; an unknown constraint
 * fails with `DEVHOST_BAD_ROUTE`.
 */
import { DevHostError } from '../errors';

type Constraint = 'int' | 'long' | 'bool' | 'guid' | 'alpha';
const CONSTRAINTS: Record<Constraint, RegExp> = {
  int: /^-?\d{1,10}$/,
  long: /^-?\d{1,19}$/,
  bool: /^(true|false)$/i,
  guid: /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i,
  alpha: /^[a-z]+$/i,
};

type Segment =
  | { readonly kind: 'literal'; readonly text: string }
  | { readonly kind: 'param'; readonly name: string; readonly optional: boolean; readonly catchAll: boolean; readonly constraint?: Constraint };

export interface RouteEntry<T> {
  readonly functionName: string;
  readonly template: string;
  /** Upper-case methods; empty means every method. */
  readonly methods: readonly string[];
  readonly target: T;
}

export interface RouteMatch<T> {
  readonly entry: RouteEntry<T>;
  readonly params: Record<string, string>;
}

interface CompiledRoute<T> {
  readonly entry: RouteEntry<T>;
  readonly segments: readonly Segment[];
  readonly rank: number[];
}

function parseTemplate(template: string, functionName: string): Segment[] {
  const parts = template.split('/').filter((p) => p !== '');
  return parts.map((part, index): Segment => {
    const param = /^\{(\*)?([A-Za-z_][A-Za-z0-9_]*)(?::([a-z]+))?(\?)?\}$/.exec(part);
    if (param === null) {
      if (part.includes('{') || part.includes('}')) {
        throw new DevHostError('DEVHOST_BAD_ROUTE', `Function "${functionName}": route segment "${part}" is not supported (one literal or one {parameter} per segment).`, true);
      }
      return { kind: 'literal', text: part.toLowerCase() };
    }
    const [, star, name, constraint, optional] = param;
    if (constraint !== undefined && !(constraint in CONSTRAINTS)) {
      throw new DevHostError('DEVHOST_BAD_ROUTE', `Function "${functionName}": route constraint "${constraint}" is not supported (int, long, bool, guid, alpha).`, true);
    }
    const last = index === parts.length - 1;
    if ((optional !== undefined || star !== undefined) && !last) {
      throw new DevHostError('DEVHOST_BAD_ROUTE', `Function "${functionName}": optional and catch-all parameters must be the last route segment.`, true);
    }
    return {
      kind: 'param',
      name: name ?? '',
      optional: optional !== undefined || star !== undefined,
      catchAll: star !== undefined,
      ...(constraint === undefined ? {} : { constraint: constraint as Constraint }),
    };
  });
}

function segmentRank(segment: Segment): number {
  if (segment.kind === 'literal') return 0;
  if (segment.catchAll) return 4;
  if (segment.optional) return 3;
  return segment.constraint === undefined ? 2 : 1;
}

export class RouteTable<T> {
  readonly #routes: CompiledRoute<T>[] = [];

  add(entry: RouteEntry<T>): void {
    const segments = parseTemplate(entry.template, entry.functionName);
    const key = segments.map((s) => (s.kind === 'literal' ? s.text : `{${s.catchAll ? '*' : ''}${s.constraint ?? ''}${s.optional ? '?' : ''}}`)).join('/');
    for (const other of this.#routes) {
      const otherKey = other.segments.map((s) => (s.kind === 'literal' ? s.text : `{${s.catchAll ? '*' : ''}${s.constraint ?? ''}${s.optional ? '?' : ''}}`)).join('/');
      const overlap = entry.methods.length === 0 || other.entry.methods.length === 0 || entry.methods.some((m) => other.entry.methods.includes(m));
      if (key === otherKey && overlap) {
        throw new DevHostError(
          'DEVHOST_ROUTE_CONFLICT',
          `Functions "${other.entry.functionName}" and "${entry.functionName}" both claim route "${entry.template}" for the same method.`,
          true,
        );
      }
    }
    this.#routes.push({ entry, segments, rank: segments.map(segmentRank) });
    this.#routes.sort((a, b) => compareRank(a.rank, b.rank));
  }

  get entries(): ReadonlyArray<RouteEntry<T>> {
    return this.#routes.map((r) => r.entry);
  }

  /** The best route for `path` (relative to the prefix, no leading slash) and `method`, or undefined. */
  match(path: string, method: string): RouteMatch<T> | undefined {
    const parts = path.split('/').filter((p) => p !== '');
    const upper = method.toUpperCase();
    for (const route of this.#routes) {
      if (route.entry.methods.length > 0 && !route.entry.methods.includes(upper)) continue;
      const params = matchSegments(route.segments, parts);
      if (params !== undefined) return { entry: route.entry, params };
    }
    return undefined;
  }
}

function compareRank(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const x = a[i] ?? -1;
    const y = b[i] ?? -1;
    if (x !== y) return x - y;
  }
  return 0;
}

function matchSegments(segments: readonly Segment[], parts: readonly string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i += 1) {
    const segment = segments[i] as Segment;
    const part = parts[i];
    if (segment.kind === 'literal') {
      if (part === undefined || safeDecode(part)?.toLowerCase() !== segment.text) return undefined;
      continue;
    }
    if (segment.catchAll) {
      const rest = parts.slice(i).map(safeDecode);
      if (rest.some((p) => p === undefined)) return undefined;
      if (rest.length > 0) params[segment.name] = rest.join('/');
      return params;
    }
    if (part === undefined) {
      if (segment.optional) return params;
      return undefined;
    }
    const value = safeDecode(part);
    if (value === undefined) return undefined;
    if (segment.constraint !== undefined && !CONSTRAINTS[segment.constraint].test(value)) return undefined;
    params[segment.name] = value;
  }
  return parts.length === segments.length ? params : undefined;
}

function safeDecode(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}
