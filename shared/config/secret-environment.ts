import { VARIABLES } from './variables.js';

/** Every spelling of every setting the table marks secret (ADMIN_PASSWORD, PROXY_TOKEN, ...). */
export function secretVariableNames(): string[] {
  return VARIABLES.filter((v) => v.secret === true).flatMap((v) => [v.name, ...(v.aliases ?? [])]);
}

/**
 * Removes the secret settings from an environment once the configuration has been read from it.
 * Workers (forked with the supervisor's environment) and tor processes (spawned with it) then
 * never hold them: /proc/<pid>/environ of those processes shows no password or token, and a
 * crash dump or a `ps e` of a worker leaks none.
 */
export function removeSecretsFromEnvironment(env: Record<string, string | undefined>): void {
  for (const name of secretVariableNames()) delete env[name];
}
