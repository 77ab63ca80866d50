/**
 * Reads Bicep files for the offline infrastructure checks, with the tree-sitter-bicep grammar
 * (npm `tree-sitter-bicep`, its WebAssembly build, run by `web-tree-sitter`): no Bicep CLI, no
 * network.
 *
 * Guarantees: `syntaxErrors` reports every ERROR/MISSING node the grammar produces, with line and
 * column; `evaluate` computes what a value expression yields from literals, parameter defaults,
 * variables, `string()`, `empty()`, `!`, `&&`, `||`, ternaries, interpolation and
 * `environment().suffixes.storage` (the public cloud's value).
 * Not guaranteed: this is a syntax check and a small evaluator, not the Bicep compiler. It does
 * not type-check, resolve registry modules or know resource schemas. Anything it cannot compute
 * (a module output, a resource property) evaluates to a stable placeholder made of the
 * expression's letters and digits, e.g. `storage.outputs.name` -> `storageoutputsname`, so tests
 * can still see which value a setting is built from.
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
  evaluate(node: Node): BicepValue {
    switch (node.type) {
      case 'string':
        return this.evaluateString(node);
      case 'number':
        return Number(node.text);
      case 'boolean':
        return node.text === 'true';
      case 'null':
        return null;
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner === null ? null : this.evaluate(inner);
      }
      case 'array':
        return node.namedChildren.filter((c): c is Node => c !== null).map((c) => this.evaluate(c));
      case 'object':
        return Object.fromEntries(BicepFile.objectProperties(node).map(([k, v]) => [k, this.evaluate(v)]));
      case 'identifier':
        return this.evaluateIdentifier(node);
      case 'unary_expression': {
        const operand = node.namedChild(0);
        const operator = node.child(0)?.text;
        if (operand === null || operator !== '!') return placeholder(node);
        const value = this.evaluate(operand);
        return typeof value === 'boolean' ? !value : placeholder(node);
      }
      case 'binary_expression': {
        const [left, right] = [node.namedChild(0), node.namedChild(1)];
        const operator = node.children.find((c) => c !== null && !c.isNamed)?.text;
        if (left === null || right === null) return placeholder(node);
        const [a, b] = [this.evaluate(left), this.evaluate(right)];
        if (typeof a !== 'boolean' || typeof b !== 'boolean') return placeholder(node);
        if (operator === '&&') return a && b;
        if (operator === '||') return a || b;
        return placeholder(node);
      }
      case 'ternary_expression': {
        const [condition, whenTrue, whenFalse] = [node.namedChild(0), node.namedChild(1), node.namedChild(2)];
        if (condition === null || whenTrue === null || whenFalse === null) return placeholder(node);
        const test = this.evaluate(condition);
        if (typeof test !== 'boolean') return placeholder(node);
        return this.evaluate(test ? whenTrue : whenFalse);
      }
      case 'call_expression':
        return this.evaluateCall(node);
      case 'member_expression': {
        // The public cloud's storage suffix; other clouds differ, which is why the Bicep asks.
        if (node.text.replace(/\s/g, '') === 'environment().suffixes.storage') return 'core.windows.net';
        // tree-sitter-bicep 1.1.0 binds `c ? a : x.y.z` as `(c ? a : x.y).z`; Bicep means
        // `c ? a : (x.y.z)`. Re-associate so the condition still decides.
        let object = node.namedChild(0);
        while (object?.type === 'member_expression') object = object.namedChild(0);
        if (object?.type === 'ternary_expression') {
          const [condition, whenTrue] = [object.namedChild(0), object.namedChild(1)];
          const test = condition === null ? undefined : this.evaluate(condition);
          if (test === true && whenTrue !== null) return this.evaluate(whenTrue);
          if (test === false) return placeholderOf(node.text.slice(node.text.indexOf(':') + 1));
        }
        return placeholder(node);
      }
      default:
        return placeholder(node);
    }
  }

  private evaluateIdentifier(node: Node): BicepValue {
    const parameter = this.parameters.get(node.text);
    if (parameter !== undefined) return parameter.defaultValue === undefined ? placeholder(node) : this.evaluate(parameter.defaultValue);
    const variable = this.variables.get(node.text);
    if (variable !== undefined) return this.evaluate(variable);
    return placeholder(node);
  }

  private evaluateCall(node: Node): BicepValue {
    const callee = node.namedChild(0)?.text;
    const args = (node.namedChildren.find((c) => c?.type === 'arguments')?.namedChildren ?? []).filter((c): c is Node => c !== null);
    const first = args[0];
    if (callee === 'string' && args.length === 1 && first !== undefined) {
      const value = this.evaluate(first);
      return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
    }
    if (callee === 'empty' && args.length === 1 && first !== undefined) {
      const value = this.evaluate(first);
      if (value === null || value === '') return true;
      if (Array.isArray(value)) return value.length === 0;
      if (typeof value === 'string' && !isPlaceholder(value)) return false;
      if (typeof value === 'object') return Object.keys(value).length === 0;
      return placeholder(node);
    }
    return placeholder(node);
  }

  private evaluateString(node: Node): string {
    let text = '';
    for (const part of node.children) {
      if (part === null) continue;
      if (part.type === 'string_content') text += part.text;
      else if (part.type === 'escape_sequence') text += unescape(part.text);
      else if (part.type === 'interpolation') {
        const inner = part.namedChild(0);
        const value = inner === null ? '' : this.evaluate(inner);
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

/** Drop the internal marker: what a test compares against. */
export function plain(value: BicepValue | undefined): string | undefined {
  if (value === undefined) return undefined;
  const text = typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
  return text.split(PLACEHOLDER_MARK).join('');
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
