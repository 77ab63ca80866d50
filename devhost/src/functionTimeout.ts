/**
 * host.json `functionTimeout`, enforced like the Functions host: an invocation still running when it
 * expires fails with the WebJobs SDK's FunctionTimeoutException message ("Timeout value of 00:05:00
 * was exceeded by function: Functions.<name>", Azure/azure-webjobs-sdk
 * src/Microsoft.Azure.WebJobs.Host/Executors/FunctionExecutor.cs), so its trigger treats it as a
 * failed invocation (an activity fails with that reason, a queue message is retried, HTTP answers
 * 500) and its output bindings are not written.
 *
 * Not reproduced, and said loudly in the log each time: the real host then restarts the language
 * worker process (every invocation running in it is lost, azure-functions-host
 * FunctionInvocationDispatcher restart on timeout). Here the host and the app share one process, so
 * the timed-out code keeps running in the background until it ends by itself.
 */
import { type FunctionInvoker, type HostedFunction, type InvocationRequest, type InvocationResult } from './contracts';
import { DevHostError } from './errors';
import { type Logger } from './log';

export class FunctionTimeoutError extends DevHostError {
  override readonly name: string = 'FunctionTimeoutException';
  constructor(
    readonly functionName: string,
    readonly timeoutMs: number,
  ) {
    super('DEVHOST_FUNCTION_TIMEOUT', `Timeout value of ${formatTimeSpan(timeoutMs)} was exceeded by function: Functions.${functionName}`);
  }
}

/** .NET TimeSpan's constant ("c") format: `[d.]hh:mm:ss[.fffffff]`. */
export function formatTimeSpan(ms: number): string {
  const totalSeconds = Math.floor(ms / 1000);
  const days = Math.floor(totalSeconds / 86_400);
  const two = (n: number): string => String(n).padStart(2, '0');
  const clock = `${two(Math.floor(totalSeconds / 3600) % 24)}:${two(Math.floor(totalSeconds / 60) % 60)}:${two(totalSeconds % 60)}`;
  const fraction = ms % 1000 === 0 ? '' : `.${String(Math.round((ms % 1000) * 10_000)).padStart(7, '0')}`;
  return `${days > 0 ? `${days}.` : ''}${clock}${fraction}`;
}

/** The app's invoker with `functionTimeout` applied to every invocation (undefined: no limit, host.json "-1"). */
export class TimeoutInvoker implements FunctionInvoker {
  constructor(
    private readonly inner: FunctionInvoker,
    private readonly timeoutMs: number | undefined,
    private readonly logger: Logger,
  ) {}

  list(): readonly HostedFunction[] {
    return this.inner.list();
  }

  invoke(functionName: string, request: InvocationRequest): Promise<InvocationResult> {
    const running = this.inner.invoke(functionName, request);
    const limit = this.timeoutMs;
    if (limit === undefined) return running;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        this.logger.error('host.function_timeout', {
          code: 'DEVHOST_FUNCTION_TIMEOUT',
          function: functionName,
          functionTimeout: formatTimeSpan(limit),
          hint: 'The real host now restarts the worker process, losing every invocation running in it; the development host cannot, so this invocation keeps running in the background.',
        });
        reject(new FunctionTimeoutError(functionName, limit));
      }, limit);
    });
    // The abandoned invocation may still fail later: that is no longer anyone's result.
    running.catch(() => undefined);
    return Promise.race([running, expired]).finally(() => clearTimeout(timer));
  }
}
