/**
 * The logger the development host writes to, and the interface an embedding caller may supply
 * instead: structured lines (`event` is a stable name, fields never hold keys or connection
 * strings). `createLogger` writes one JSON object per line, warnings and errors to stderr; the
 * level comes from `DEVHOST_LOG_LEVEL` (debug, info, warn, error; default info).
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

export type LogLine = { ts: string; level: LogLevel; component: string; event: string } & Record<string, unknown>;
export type LogSink = (line: LogLine) => void;

const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
export const LOG_LEVEL_SETTING = 'DEVHOST_LOG_LEVEL';

function threshold(): number {
  const configured = (process.env[LOG_LEVEL_SETTING] ?? 'info').toLowerCase();
  return configured in LEVELS ? LEVELS[configured as LogLevel] : LEVELS.info;
}

const consoleSink: LogSink = (line) => {
  const text = JSON.stringify(line, (_key, value: unknown) => (value instanceof Error ? { name: value.name, message: value.message } : value));
  if (line.level === 'error' || line.level === 'warn') console.error(text);
  else console.log(text);
};

export function createLogger(component: string, sink: LogSink = consoleSink, minLevel: number = threshold()): Logger {
  const log = (level: LogLevel, event: string, fields: LogFields = {}): void => {
    if (LEVELS[level] < minLevel) return;
    sink({ ts: new Date().toISOString(), level, component, event, ...fields });
  };
  return {
    log,
    info: (event, fields) => log('info', event, fields),
    warn: (event, fields) => log('warn', event, fields),
    error: (event, fields) => log('error', event, fields),
    debug: (event, fields) => log('debug', event, fields),
    child: (sub) => createLogger(`${component}.${sub}`, sink, minLevel),
  };
}

/** A logger that keeps every line in memory, whatever the level setting (tests). */
export function memoryLogger(component = 'test'): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  return Object.assign(createLogger(component, (line) => lines.push(line), LEVELS.debug), { lines });
}
