import { MAX_POOL_SIZE, MAX_WARM_SPARES } from './config.js';
import { VARIABLES } from './variables.js';

/**
 * docs/configuration.md, rendered from the variable table. `npm run docs:config` writes it
 * and a test fails when the file and the table differ, so the docs cannot drift.
 */
export function renderConfigurationDoc(): string {
  const rows = VARIABLES.map((v) => {
    const names = [v.name, ...(v.aliases ?? [])].map((n) => `\`${n}\``).join(' / ');
    const def = v.defaultDoc ?? (v.defaultText === '' ? '(empty)' : `\`${v.defaultText}\``);
    return `| ${names} | ${def} | ${v.description.replace(/\|/g, '\\|')} |`;
  });
  return [
    '# Configuration',
    '',
    '<!-- Generated from shared/config/variables.ts by `npm run docs:config`; a test keeps them equal. -->',
    '',
    'exitpool reads its configuration from environment variables, once, in the supervisor.',
    'Every problem is reported at once, naming the variable, and the service refuses to start.',
    'An empty value counts as unset. Durations are Go-style (`90s`, `10m`, `1h30m`; a bare number',
    'is seconds). Booleans accept `true/false`, `1/0`, `yes/no`, `on/off`. Older configurations write',
    "`NET_` where tor's own option names say `TOR_`: both spellings are accepted; set only one.",
    '',
    'Settings are read from the environment, and from `./.env` (or the file `EXITPOOL_ENV_FILE` names)',
    'for variables the environment does not set: the environment wins over the file.',
    '',
    `\`MAX_POOL_SIZE\` (in \`shared/config/limits.ts\`) is ${MAX_POOL_SIZE}: the upper bound of \`POOL_SIZE\` and of a resize.`,
    `\`MAX_WARM_SPARES\` is ${MAX_WARM_SPARES}: the upper bound of \`WARM_SPARES\`.`,
    '',
    '| variable | default | meaning |',
    '| --- | --- | --- |',
    ...rows,
    '',
    'Cross-checks: `MIN_READY` must not exceed `POOL_SIZE`; `POOL_SIZE` + `WARM_SPARES` must not',
    'exceed `MAX_POOL_SIZE` (a resize keeps room for the spares too); `SESSION_PORT_BASE` requires',
    '`AUTH_DISABLED`; the listener ports, the instance port block (`INSTANCE_PORT_BASE` …',
    '+ 2·`MAX_POOL_SIZE`) and the session port block (`SESSION_PORT_BASE` … + `MAX_POOL_SIZE`)',
    'must not overlap; `REMEDIATION_BACKOFF_BASE` must not exceed `REMEDIATION_BACKOFF_MAX`.',
    '',
  ].join('\n');
}

/** .env.example: every variable, commented out at its default, with its meaning. */
export function renderEnvExample(): string {
  const lines = [
    '# exitpool configuration. Generated from shared/config/variables.ts by `npm run docs:config`.',
    '# Every variable is optional; each line shows the default. See docs/configuration.md.',
    '# Copy this file to .env in the directory you start exitpool from (or point EXITPOOL_ENV_FILE',
    '# at it) and uncomment what you change: variables set in the environment win over the file.',
    '',
  ];
  for (const v of VARIABLES) {
    lines.push(`# ${v.description}`);
    if (v.aliases?.length) lines.push(`# Also accepted as: ${v.aliases.join(', ')}`);
    const def = v.defaultText ?? '';
    if (v.defaultDoc) lines.push(`# default: ${v.defaultDoc}`);
    lines.push(`#${v.name}=${def}`);
    lines.push('');
  }
  return lines.filter((l, i, a) => !(l === '' && a[i - 1] === '')).join('\n');
}
