/**
 * Structured log lines: one JSON object per line on stdout/stderr. On Azure the Functions host
 * reads the worker's console line by line and logs each to Application Insights `traces` under the
 * category `Host.Function.Console` (host.json must let that category through at Information):
 * stdout as Information, stderr as Warning when the line contains "warn", else Error when it
 * contains "error" or "fail". So warn and error lines go to stderr, the rest to stdout, and the
 * `level` field itself makes the host pick the matching severity. The JSON stays in `message`
 * (queried with parse_json; see docs/operations.md "Observability"): customDimensions carry only the host's own
 * fields, since neither console lines nor `context.log` carry properties from Node.js.
 * `event` is a stable name (shared/observability/events.ts lists the ones operators query);
 * fields never hold secrets (connection strings, keys, lease ids in full).
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  log(level: LogLevel, event: string, fields?: LogFields): void;
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  debug(event: string, fields?: LogFields): void;
  child(component: string): Logger;
}

export type LogSink = (line: { ts: string; level: LogLevel; component: string; event: string } & Record<string, unknown>) => void;

const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

function minLevel(): number {
  const configured = (process.env.COORDINATOR_LOG_LEVEL ?? 'info').toLowerCase();
  return configured in LEVELS ? LEVELS[configured as LogLevel] : LEVELS.info;
}

const consoleSink: LogSink = (line) => {
  const text = JSON.stringify(line, (_key, value: unknown) =>
    value instanceof Error ? { name: value.name, message: value.message } : value,
  );
  if (line.level === 'error' || line.level === 'warn') console.error(text);
  else console.log(text);
};

export function createLogger(component: string, sink: LogSink = consoleSink, threshold: number = minLevel()): Logger {
  const log = (level: LogLevel, event: string, fields: LogFields = {}): void => {
    if (LEVELS[level] < threshold) return;
    sink({ ts: new Date().toISOString(), level, component, event, ...fields });
  };
  return {
    log,
    info: (event, fields) => log('info', event, fields),
    warn: (event, fields) => log('warn', event, fields),
    error: (event, fields) => log('error', event, fields),
    debug: (event, fields) => log('debug', event, fields),
    child: (sub) => createLogger(`${component}.${sub}`, sink, threshold),
  };
}

/** A logger that keeps lines in memory (tests), from `level` up (default: COORDINATOR_LOG_LEVEL's). */
export function memoryLogger(component = 'test', level?: LogLevel): Logger & { lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger(component, (line) => lines.push(line), level === undefined ? minLevel() : LEVELS[level]);
  return Object.assign(logger, { lines });
}
