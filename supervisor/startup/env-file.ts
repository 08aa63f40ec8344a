import fs from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { StartupError } from './startup-error.js';
import { errorMessage } from '../../shared/errors/error-message.js';

/** Names a settings file other than ./.env; set it in the environment, not in a file. */
export const ENV_FILE_VARIABLE = 'EXITPOOL_ENV_FILE';

/**
 * Reads KEY=value lines (Node's own dotenv parser, util.parseEnv) from `$EXITPOOL_ENV_FILE`, or
 * from `.env` in the working directory when that exists, into `env`. A variable already in the
 * environment wins over the file, so `FOO=1 exitpool` overrides the file as one would expect.
 * Returns the file read, or null when there was none. A file named by EXITPOOL_ENV_FILE that
 * cannot be read is an error: the operator asked for it.
 */
export function loadEnvFile(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string | null {
  const named = env[ENV_FILE_VARIABLE];
  const explicit = named !== undefined && named !== '';
  const file = explicit ? path.resolve(cwd, named) : path.join(cwd, '.env');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if (!explicit && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StartupError(explicit ? ENV_FILE_VARIABLE : '.env', `cannot read ${file}: ${errorMessage(e)}`);
  }
  for (const [key, value] of Object.entries(parseEnv(text))) {
    if (env[key] === undefined) env[key] = value;
  }
  return file;
}
