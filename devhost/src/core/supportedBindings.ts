/**
 * Which triggers and bindings the development host can run. Anything else fails at start with the
 * function's and the binding's name (the real host would run it; we would silently not), so an app
 * that grows a new binding type finds out on its first `npm start`, not in production.
 */
import { type BindingMetadata, type HostedFunction } from '../contracts';
import { DevHostError } from '../errors';

export const SUPPORTED_TRIGGERS = ['httpTrigger', 'timerTrigger', 'queueTrigger', 'orchestrationTrigger', 'activityTrigger'] as const;
export const SUPPORTED_INPUTS = ['durableClient'] as const;
/** `http` only as the output of an HTTP-triggered function. */
export const SUPPORTED_OUTPUTS = ['queue', 'http'] as const;

function describe(fn: string, name: string, binding: BindingMetadata): string {
  return `Function "${fn}": binding "${name}" (type "${binding.type}", direction "${binding.direction}")`;
}

/** Throws `DEVHOST_UNSUPPORTED_BINDING` for the first binding this host cannot serve. */
export function assertSupported(fn: HostedFunction): void {
  const fail = (name: string, binding: BindingMetadata, why: string): never => {
    throw new DevHostError('DEVHOST_UNSUPPORTED_BINDING', `${describe(fn.name, name, binding)} ${why}`, true);
  };
  for (const [name, binding] of Object.entries(fn.bindings)) {
    const type = binding.type;
    if (/trigger$/i.test(type)) {
      if (!(SUPPORTED_TRIGGERS as readonly string[]).includes(type)) {
        fail(name, binding, `is not supported by the development host; supported triggers: ${SUPPORTED_TRIGGERS.join(', ')}.`);
      }
    } else if (binding.direction === 'in') {
      if (!(SUPPORTED_INPUTS as readonly string[]).includes(type)) {
        fail(name, binding, `is not supported by the development host; supported input bindings: ${SUPPORTED_INPUTS.join(', ')}.`);
      }
    } else if (binding.direction === 'out') {
      if (!(SUPPORTED_OUTPUTS as readonly string[]).includes(type)) {
        fail(name, binding, `is not supported by the development host; supported output bindings: ${SUPPORTED_OUTPUTS.join(', ')}.`);
      }
      if (type === 'http' && fn.triggerType !== 'httpTrigger') {
        fail(name, binding, 'is an http output on a function that is not HTTP-triggered.');
      }
    } else {
      fail(name, binding, 'has a direction the development host does not support.');
    }
  }
}
