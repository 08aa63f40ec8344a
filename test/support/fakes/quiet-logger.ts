import winston from 'winston';

/** A logger that swallows everything, for tests that exercise error paths on purpose. */
export function quietLogger(): winston.Logger {
  return winston.createLogger({ silent: true, transports: [new winston.transports.Console()] });
}
