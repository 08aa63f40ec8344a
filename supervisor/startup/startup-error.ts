/**
 * The service cannot start as configured: a listener cannot bind, the tor binary cannot run.
 * The CLI prints one line naming the setting and exits with EX_CONFIG (78), as for invalid
 * configuration, so pm2's and systemd's restart limits see a failure instead of a crash loop.
 */
export class StartupError extends Error {
  constructor(
    /** The setting to change (SOCKS_PORT, BIND_HOST, TOR_BINARY, ...). */
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
    this.name = 'StartupError';
  }
}
