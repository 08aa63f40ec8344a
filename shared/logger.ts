import winston from 'winston';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

export type Logger = winston.Logger;

/** Structured fields that may be attached to any log line; `instance` is always a number. */
export interface LogFields {
  instance?: number;
  worker?: string;
  [key: string]: unknown;
}

let root: winston.Logger | undefined;

function processTag(): string {
  return process.env.EXITPOOL_PROCESS_ROLE ?? 'main';
}

/**
 * One root logger per process. JSON when LOG_FORMAT=json (machines, containers),
 * otherwise a compact text line that still carries every structured field.
 */
export function createRootLogger(level: LogLevel = 'info', format: 'text' | 'json' = 'text'): winston.Logger {
  const role = processTag();
  const textFormat = winston.format.printf((info) => {
    const { level: lvl, message, timestamp, ...rest } = info as Record<string, unknown> & {
      level: string;
      message: unknown;
      timestamp?: string;
    };
    const fields = Object.entries(rest)
      .filter(([k]) => typeof k === 'string')
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(' ');
    return `${timestamp ?? ''} ${lvl.padEnd(5)} ${String(message)}${fields ? ' ' + fields : ''}`;
  });
  root = winston.createLogger({
    level,
    defaultMeta: { process: role },
    format:
      format === 'json'
        ? winston.format.combine(winston.format.timestamp(), winston.format.json())
        : winston.format.combine(winston.format.timestamp(), textFormat),
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] })],
  });
  return root;
}

export function logger(): winston.Logger {
  return root ?? createRootLogger((process.env.LOG_LEVEL as LogLevel | undefined) ?? 'info');
}

export function childLogger(fields: LogFields): winston.Logger {
  return logger().child(fields);
}
