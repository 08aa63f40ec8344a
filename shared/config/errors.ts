/** One problem with one variable; the config loader collects all of them before refusing. */
export interface ConfigProblem {
  variable: string;
  message: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    // One problem is one line (what a log line or `systemctl status` shows); several get a line each.
    super(
      problems.length === 1
        ? `invalid configuration: ${problems[0]?.variable}: ${problems[0]?.message}`
        : `invalid configuration (${problems.length} problems):\n` + problems.map((p) => `  ${p.variable}: ${p.message}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}
