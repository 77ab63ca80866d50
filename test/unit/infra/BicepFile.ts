/**
 * Reads Bicep files for the offline infrastructure checks, with the tree-sitter-bicep grammar
 * (npm `tree-sitter-bicep`, its WebAssembly build, run by `web-tree-sitter`): no Bicep CLI, no
 * network.
 *
 * Guarantees: `syntaxErrors` reports every ERROR/MISSING node the grammar produces, with line and
 * column; `evaluate` computes what a value expression yields from literals, parameter defaults (or
 * the values given to `withParameters`), variables, property access, `string()`, `empty()`,
 * `union()`, `items()`, `filter()`, `map()`, `toObject()` with their lambdas, `!`, `&&`, `||`,
 * ternaries, interpolation and `environment().suffixes.storage` (the public cloud's value).
 * Not guaranteed: this is a syntax check and a small evaluator, not the Bicep compiler. It does
 * not type-check, resolve registry modules or know resource schemas. Anything it cannot compute
 * (a module output, a resource property) evaluates to a stable placeholder made of the
 * expression's letters and digits, e.g. `storage.outputs.name` -> `storageoutputsname`, so tests
 * can still see which value a setting is built from; `empty()` takes such a value as non-empty.
 */
import { readFileSync } from 'node:fs';

import { Language, type Node, Parser } from 'web-tree-sitter';

export type BicepValue = string | number | boolean | null | readonly BicepValue[] | { readonly [key: string]: BicepValue };

export interface SyntaxError {
  readonly line: number;
  readonly column: number;
  readonly text: string;
}

export interface ParameterDeclaration {
  readonly name: string;
  readonly type: string;
  /** The default's syntax node; undefined when the parameter is required. */
  readonly defaultValue: Node | undefined;
  /** Decorator name -> its argument texts, e.g. minValue -> ['15']. */
  readonly decorators: ReadonlyMap<string, readonly string[]>;
}

/** Lambda parameters in scope while a lambda body is evaluated. */
type Scope = ReadonlyMap<string, BicepValue>;
const NO_SCOPE: Scope = new Map();

interface Lambda {
  readonly parameters: readonly string[];
  readonly body: Node;
  /** Property accesses the grammar hung on the lambda instead of its body (see `lambdaOf`). */
  readonly thenProperties: readonly string[];
}

let parserPromise: Promise<Parser> | undefined;

async function bicepParser(): Promise<Parser> {
  parserPromise ??= (async () => {
    await Parser.init();
    const language = await Language.load(require.resolve('tree-sitter-bicep/tree-sitter-bicep.wasm'));
    const parser = new Parser();
    parser.setLanguage(language);
    return parser;
  })();
  return parserPromise;
}

export class BicepFile {
  readonly parameters: ReadonlyMap<string, ParameterDeclaration>;
  readonly variables: ReadonlyMap<string, Node>;

  private constructor(
    readonly path: string,
    readonly source: string,
    readonly root: Node,
    /** Parameter values that replace the defaults, as a deployment (or a module call) would pass them. */
    private readonly parameterValues: ReadonlyMap<string, BicepValue> = new Map(),
  ) {
    const parameters = new Map<string, ParameterDeclaration>();
    const variables = new Map<string, Node>();
    for (const node of root.namedChildren) {
      if (node === null) continue;
      if (node.type === 'parameter_declaration') {
        const name = node.namedChildren.find((c) => c?.type === 'identifier')?.text;
        if (name === undefined) continue;
        const type = node.namedChildren.find((c) => c?.type === 'type')?.text ?? '';
        const equals = node.children.findIndex((c) => c?.type === '=');
        const defaultValue = equals < 0 ? undefined : (node.children.slice(equals + 1).find((c) => c?.isNamed === true) ?? undefined);
        parameters.set(name, { name, type, defaultValue, decorators: decoratorsOf(node) });
      } else if (node.type === 'variable_declaration') {
        const name = node.namedChildren.find((c) => c?.type === 'identifier')?.text;
        const value = node.namedChildren.at(-1);
        if (name !== undefined && value !== null && value !== undefined) variables.set(name, value);
      }
    }
    this.parameters = parameters;
    this.variables = variables;
  }

  static async parse(path: string, source: string = readFileSync(path, 'utf8')): Promise<BicepFile> {
    const parser = await bicepParser();
    const tree = parser.parse(source);
    if (tree === null) throw new Error(`tree-sitter returned no tree for ${path}`);
    return new BicepFile(path, source, tree.rootNode);
  }

  /** The same file evaluated with these parameter values instead of the defaults (unknown names are an error). */
  withParameters(values: Readonly<Record<string, BicepValue>>): BicepFile {
    for (const name of Object.keys(values)) {
      if (!this.parameters.has(name)) throw new Error(`${this.path} declares no parameter ${name}`);
    }
    return new BicepFile(this.path, this.source, this.root, new Map([...this.parameterValues, ...Object.entries(values)]));
  }

  /** Every ERROR or MISSING node: an empty list means the file is syntactically valid Bicep. */
  syntaxErrors(): SyntaxError[] {
    const errors: SyntaxError[] = [];
    const visit = (node: Node): void => {
      if (node.isError || node.isMissing) {
        errors.push({
          line: node.startPosition.row + 1,
          column: node.startPosition.column + 1,
          text: node.isMissing ? `missing ${node.type}` : node.text.slice(0, 80),
        });
        return;
      }
      for (const child of node.children) if (child !== null) visit(child);
    };
    visit(this.root);
    return errors;
  }

  /** All nodes of one type, anywhere in the file. */
  nodesOfType(type: string): Node[] {
    return this.root.descendantsOfType(type).filter((n): n is Node => n !== null);
  }

  /** The properties of an object literal, in source order (key text without quotes -> value node). */
  static objectProperties(node: Node): [string, Node][] {
    if (node.type !== 'object') throw new Error(`expected an object literal, got ${node.type} at line ${node.startPosition.row + 1}`);
    return node.namedChildren
      .filter((c): c is Node => c?.type === 'object_property')
      .map((property) => {
        const key = property.namedChild(0);
        const value = property.namedChildren.at(-1);
        if (key === null || value === null || value === undefined) throw new Error(`malformed property at line ${property.startPosition.row + 1}`);
        return [key.type === 'string' ? stringText(key) : key.text, value];
      });
  }

  /** The value of a variable whose value is an object literal, each property evaluated. */
  evaluateObjectVariable(name: string): Map<string, BicepValue> {
    const node = this.variables.get(name);
    if (node === undefined) throw new Error(`${this.path} has no variable ${name}`);
    return new Map(BicepFile.objectProperties(node).map(([key, value]) => [key, this.evaluate(value)]));
  }

  /** The parameter an expression passes through unchanged (`p` or `string(p)`), if any. */
  parameterBehind(node: Node): ParameterDeclaration | undefined {
    if (node.type === 'identifier') return this.parameters.get(node.text);
    if (node.type === 'call_expression' && node.namedChild(0)?.text === 'string') {
      const args = node.namedChildren.find((c) => c?.type === 'arguments')?.namedChildren ?? [];
      const only = args.length === 1 ? args[0] : undefined;
      return only?.type === 'identifier' ? this.parameters.get(only.text) : undefined;
    }
    return undefined;
  }

  /** What an expression yields at deployment, as far as it can be known offline (see the module note). */
  evaluate(node: Node, scope: Scope = NO_SCOPE): BicepValue {
    switch (node.type) {
      case 'string':
        return this.evaluateString(node, scope);
      case 'number':
        return Number(node.text);
      case 'boolean':
        return node.text === 'true';
      case 'null':
        return null;
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner === null ? null : this.evaluate(inner, scope);
      }
      case 'array':
        return node.namedChildren.filter((c): c is Node => c !== null).map((c) => this.evaluate(c, scope));
      case 'object':
        return Object.fromEntries(BicepFile.objectProperties(node).map(([k, v]) => [k, this.evaluate(v, scope)]));
      case 'identifier':
        return this.evaluateIdentifier(node, scope);
      case 'unary_expression': {
        const operand = node.namedChild(0);
        const operator = node.child(0)?.text;
        if (operand === null || operator !== '!') return placeholder(node);
        const value = this.evaluate(operand, scope);
        return typeof value === 'boolean' ? !value : placeholder(node);
      }
      case 'binary_expression': {
        const [left, right] = [node.namedChild(0), node.namedChild(1)];
        const operator = node.children.find((c) => c !== null && !c.isNamed)?.text;
        if (left === null || right === null) return placeholder(node);
        const [a, b] = [this.evaluate(left, scope), this.evaluate(right, scope)];
        if (typeof a !== 'boolean' || typeof b !== 'boolean') return placeholder(node);
        if (operator === '&&') return a && b;
        if (operator === '||') return a || b;
        return placeholder(node);
      }
      case 'ternary_expression': {
        const [condition, whenTrue, whenFalse] = [node.namedChild(0), node.namedChild(1), node.namedChild(2)];
        if (condition === null || whenTrue === null || whenFalse === null) return placeholder(node);
        const test = this.evaluate(condition, scope);
        if (typeof test !== 'boolean') return placeholder(node);
        return this.evaluate(test ? whenTrue : whenFalse, scope);
      }
      case 'call_expression':
        return this.evaluateCall(node, scope);
      case 'member_expression': {
        // The public cloud's storage suffix; other clouds differ, which is why the Bicep asks.
        if (node.text.replace(/\s/g, '') === 'environment().suffixes.storage') return 'core.windows.net';
        // tree-sitter-bicep 1.1.0 binds `c ? a : x.y.z` as `(c ? a : x.y).z`; Bicep means
        // `c ? a : (x.y.z)`. Re-associate so the condition still decides.
        let object = node.namedChild(0);
        while (object?.type === 'member_expression') object = object.namedChild(0);
        if (object?.type === 'ternary_expression') {
          const [condition, whenTrue] = [object.namedChild(0), object.namedChild(1)];
          const test = condition === null ? undefined : this.evaluate(condition, scope);
          if (test === true && whenTrue !== null) return this.evaluate(whenTrue, scope);
          if (test === false) return placeholderOf(node.text.slice(node.text.indexOf(':') + 1));
        }
        const [target, property] = [node.namedChild(0), node.namedChild(1)];
        if (target === null || property?.type !== 'property_identifier') return placeholder(node);
        const value = this.evaluate(target, scope);
        if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, property.text)) {
          return (value as { readonly [key: string]: BicepValue })[property.text] ?? null;
        }
        return placeholder(node);
      }
      default:
        return placeholder(node);
    }
  }

  private evaluateIdentifier(node: Node, scope: Scope): BicepValue {
    const bound = scope.get(node.text);
    if (bound !== undefined) return bound;
    const given = this.parameterValues.get(node.text);
    if (given !== undefined) return given;
    const parameter = this.parameters.get(node.text);
    if (parameter !== undefined) return parameter.defaultValue === undefined ? placeholder(node) : this.evaluate(parameter.defaultValue);
    const variable = this.variables.get(node.text);
    if (variable !== undefined) return this.evaluate(variable);
    return placeholder(node);
  }

  private evaluateCall(node: Node, scope: Scope): BicepValue {
    const callee = node.namedChild(0)?.text;
    const args = (node.namedChildren.find((c) => c?.type === 'arguments')?.namedChildren ?? []).filter((c): c is Node => c !== null);
    const first = args[0];
    if (callee === 'string' && args.length === 1 && first !== undefined) {
      const value = this.evaluate(first, scope);
      return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
    }
    if (callee === 'empty' && args.length === 1 && first !== undefined) {
      const value = this.evaluate(first, scope);
      if (value === null || value === '') return true;
      if (Array.isArray(value)) return value.length === 0;
      // A value computed at deployment (a placeholder: a module output, a resource property) counts
      // as non-empty: the outputs these templates use (names, ids, endpoints) never are.
      if (typeof value === 'string') return false;
      if (typeof value === 'object') return Object.keys(value).length === 0;
      return placeholder(node);
    }
    if (callee === 'union' && args.length > 0) {
      const objects = args.map((a) => this.evaluate(a, scope));
      if (!objects.every(isObject)) return placeholder(node);
      return Object.assign({}, ...objects) as BicepValue;
    }
    if (callee === 'items' && args.length === 1 && first !== undefined) {
      const value = this.evaluate(first, scope);
      if (!isObject(value)) return placeholder(node);
      // Bicep returns the entries sorted by key.
      return Object.keys(value)
        .sort()
        .map((key) => ({ key, value: value[key] ?? null }));
    }
    const lambdas = args.slice(1).map((a) => this.lambdaOf(a));
    const [f, g] = lambdas;
    if ((callee === 'filter' || callee === 'map' || callee === 'toObject') && first !== undefined && f !== undefined && lambdas.length <= 2) {
      const list = this.evaluate(first, scope);
      if (!isList(list) || (lambdas.length === 2 && g === undefined)) return placeholder(node);
      const apply = (lambda: Lambda, item: BicepValue): BicepValue => this.applyLambda(lambda, [item], scope);
      if (callee === 'filter' && lambdas.length === 1) {
        const kept = list.map((item) => ({ item, keep: apply(f, item) }));
        return kept.every(({ keep }) => typeof keep === 'boolean') ? kept.filter(({ keep }) => keep).map(({ item }) => item) : placeholder(node);
      }
      if (callee === 'map' && lambdas.length === 1) return list.map((item) => apply(f, item));
      if (callee === 'toObject') {
        const entries: [string, BicepValue][] = [];
        for (const item of list) {
          const key = apply(f, item);
          if (typeof key !== 'string' || isPlaceholder(key)) return placeholder(node);
          entries.push([key, g === undefined ? item : apply(g, item)]);
        }
        return Object.fromEntries(entries);
      }
    }
    return placeholder(node);
  }

  /**
   * A lambda argument, if `node` is one. tree-sitter-bicep 1.1.0 parses `x => x.key` as
   * `(x => x).key`; Bicep means `x => (x.key)`, so properties hung on a lambda belong to its body.
   */
  private lambdaOf(node: Node): Lambda | undefined {
    const thenProperties: string[] = [];
    let current: Node | null = node;
    while (current?.type === 'member_expression') {
      const property = current.namedChild(1);
      if (property?.type !== 'property_identifier') return undefined;
      thenProperties.unshift(property.text);
      current = current.namedChild(0);
    }
    if (current?.type !== 'lambda_expression') return undefined;
    const [head, body] = [current.namedChild(0), current.namedChildren.at(-1)];
    if (head === null || body === null || body === undefined || head === body) return undefined;
    const parameters = head.type === 'identifier' ? [head.text] : head.namedChildren.filter((c): c is Node => c?.type === 'identifier').map((c) => c.text);
    return { parameters, body, thenProperties };
  }

  private applyLambda(lambda: Lambda, values: readonly BicepValue[], scope: Scope): BicepValue {
    const inner = new Map(scope);
    lambda.parameters.forEach((name, i) => inner.set(name, values[i] ?? null));
    let result = this.evaluate(lambda.body, inner);
    for (const property of lambda.thenProperties) {
      if (!isObject(result) || !Object.hasOwn(result, property)) return placeholderOf(`${lambda.body.text}.${property}`);
      result = result[property] ?? null;
    }
    return result;
  }

  private evaluateString(node: Node, scope: Scope): string {
    let text = '';
    for (const part of node.children) {
      if (part === null) continue;
      if (part.type === 'string_content') text += part.text;
      else if (part.type === 'escape_sequence') text += unescape(part.text);
      else if (part.type === 'interpolation') {
        const inner = part.namedChild(0);
        const value = inner === null ? '' : this.evaluate(inner, scope);
        text += typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
      }
    }
    return text;
  }
}

const PLACEHOLDER_MARK = '\u0000';

/** An unknown value: the expression's letters and digits, lowercased (valid in a host name). */
function placeholder(node: Node): string {
  return placeholderOf(node.text);
}

function placeholderOf(expression: string): string {
  return expression.replace(/[^A-Za-z0-9]/g, '').toLowerCase() + PLACEHOLDER_MARK;
}

function isPlaceholder(value: string): boolean {
  return value.includes(PLACEHOLDER_MARK);
}

function isList(value: BicepValue): value is readonly BicepValue[] {
  return Array.isArray(value);
}

function isObject(value: BicepValue): value is { readonly [key: string]: BicepValue } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Drop the internal marker: what a test compares against. */
export function plain(value: BicepValue | undefined): string | undefined {
  if (value === undefined) return undefined;
  const strip = (v: BicepValue): BicepValue => {
    if (typeof v === 'string') return v.split(PLACEHOLDER_MARK).join('');
    if (Array.isArray(v)) return v.map(strip);
    return isObject(v) ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, strip(x)])) : v;
  };
  const stripped = strip(value);
  return typeof stripped === 'object' && stripped !== null ? JSON.stringify(stripped) : String(stripped);
}

function stringText(node: Node): string {
  return node.children
    .filter((c): c is Node => c !== null && (c.type === 'string_content' || c.type === 'escape_sequence'))
    .map((c) => (c.type === 'escape_sequence' ? unescape(c.text) : c.text))
    .join('');
}

function unescape(sequence: string): string {
  const map: Record<string, string> = { "\\'": "'", '\\\\': '\\', '\\n': '\n', '\\r': '\r', '\\t': '\t', '\\$': '$' };
  return map[sequence] ?? sequence;
}

function decoratorsOf(declaration: Node): Map<string, string[]> {
  const decorators = new Map<string, string[]>();
  const previous = declaration.previousNamedSibling;
  if (previous?.type !== 'decorators') return decorators;
  for (const decorator of previous.namedChildren) {
    const call = decorator?.namedChild(0);
    if (call?.type !== 'call_expression') continue;
    const name = call.namedChild(0)?.text;
    const args = call.namedChildren.find((c) => c?.type === 'arguments')?.namedChildren ?? [];
    if (name !== undefined) decorators.set(name, args.filter((a): a is Node => a !== null).map((a) => a.text));
  }
  return decorators;
}
