/**
 * Writes a successful invocation's queue output bindings, as the host does after the function
 * returns: an array value is one message per element; a string is sent as is, a Buffer as its
 * bytes, anything else as JSON; with `messageEncoding: base64` (the default) the body is base64 of
 * the UTF-8 bytes. The queue is created on first use. Nothing is written when the function threw.
 *
 * `BindingInvoker` wraps the app's invoker with this, so every caller (the triggers, the HTTP
 * server, the Durable backend's activities) gets output bindings applied the same way.
 */
import { type QueueClient } from '@azure/storage-queue';

import { type FunctionInvoker, type HostedFunction, type InvocationRequest, type InvocationResult } from '../contracts';
import { type MessageEncoding } from '../HostConfig';
import { type QueueBindingTarget, resolveQueueTarget } from './QueueBindingTarget';

export function encodeQueueMessage(value: unknown, encoding: MessageEncoding): string {
  const bytes = Buffer.isBuffer(value) ? value : value instanceof Uint8Array ? Buffer.from(value) : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value), 'utf8');
  return encoding === 'base64' ? bytes.toString('base64') : bytes.toString('utf8');
}

/** Called after a message is written to a queue, so a local listener on it can poll at once (the host's SharedQueueWatcher). */
export type QueueWriteObserver = (queueName: string) => void;

export class OutputBindings {
  readonly #targets = new Map<string, Array<{ bindingName: string; target: QueueBindingTarget }>>();
  readonly #created = new Set<string>();

  constructor(
    functions: readonly HostedFunction[],
    env: Readonly<Record<string, string | undefined>>,
    private readonly encoding: MessageEncoding,
    private readonly observer?: QueueWriteObserver,
  ) {
    // Resolved at start so a missing %SETTING% fails the host, not the first invocation.
    for (const fn of functions) {
      const list: Array<{ bindingName: string; target: QueueBindingTarget }> = [];
      for (const [bindingName, binding] of Object.entries(fn.bindings)) {
        if (binding.direction === 'out' && binding.type === 'queue') list.push({ bindingName, target: resolveQueueTarget(fn.name, bindingName, binding, env) });
      }
      if (list.length > 0) this.#targets.set(fn.name, list);
    }
  }

  async write(functionName: string, result: InvocationResult): Promise<void> {
    for (const { bindingName, target } of this.#targets.get(functionName) ?? []) {
      const value = bindingName === '$return' ? result.returnValue : result.outputs[bindingName];
      if (value === undefined || value === null) continue;
      const messages = Array.isArray(value) ? (value as unknown[]) : [value];
      if (messages.length === 0) continue;
      const queue = await this.#queue(target);
      for (const message of messages) {
        if (message === undefined || message === null) continue;
        await queue.sendMessage(encodeQueueMessage(message, this.encoding));
      }
      this.observer?.(target.queueName);
    }
  }

  async #queue(target: QueueBindingTarget): Promise<QueueClient> {
    const client = target.service.getQueueClient(target.queueName);
    const key = `${target.service.url}|${target.queueName}`;
    if (!this.#created.has(key)) {
      await client.createIfNotExists();
      this.#created.add(key);
    }
    return client;
  }
}

/** The app's invoker with output bindings applied after each successful invocation. */
export class BindingInvoker implements FunctionInvoker {
  constructor(
    private readonly inner: FunctionInvoker,
    private readonly outputs: OutputBindings,
  ) {}

  list(): readonly HostedFunction[] {
    return this.inner.list();
  }

  async invoke(functionName: string, request: InvocationRequest): Promise<InvocationResult> {
    const result = await this.inner.invoke(functionName, request);
    await this.outputs.write(functionName, result);
    return result;
  }
}
