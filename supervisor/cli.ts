import { ConfigError, loadConfig, removeSecretsFromEnvironment } from '../shared/config/index.js';
import { createRootLogger } from '../shared/logger.js';
import { serviceVersion } from '../shared/version.js';
import { AuthStoreCorruptError, AuthStorePersistError } from './auth/errors.js';
import { AdminPasswordResetRefused } from './auth/reset-admin-password.js';
import { loadEnvFile } from './startup/env-file.js';
import { StartupError } from './startup/startup-error.js';
import { errorMessage } from '../shared/errors/error-message.js';

/** sysexits EX_CONFIG: the service cannot run as configured. */
const EX_CONFIG = 78;

const HELP = `exitpool ${serviceVersion()}: a self-healing pool of Tor exits behind one sticky proxy

Usage: exitpool [command]

Commands:
  serve                 run the service, configured from the environment (the default)
  check-config          check the configuration and what a start needs (DATA_DIR, the
                        credential files, tor, the ports, the state store) without starting
                        anything; exits 0, or 78 naming each problem
  reset-admin-password  replace a lost dashboard password with a new one, printed once; the
                        service takes it at its next start (tokens: see docs/operations.md)
  demo                  start a private Tor network on loopback and the service on it (offline demo)
  version               print the version
  help                  show this help (also --help, -h)

Configuration is read from environment variables, and from ./.env (or the file named by
EXITPOOL_ENV_FILE) for variables the environment does not set; see docs/configuration.md.
`;

async function main(argv: string[]): Promise<number> {
  const command = argv[0] ?? 'serve';
  switch (command) {
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return 0;
    case 'version':
    case '--version':
    case '-v':
      process.stdout.write(`${serviceVersion()}\n`);
      return 0;
    case 'serve': {
      const envFile = loadEnvFile();
      const config = loadConfig(process.env);
      // Workers and tor processes inherit this environment: keep the secrets in the supervisor only.
      removeSecretsFromEnvironment(process.env);
      const log = createRootLogger(config.logLevel, config.logFormat);
      if (envFile !== null) log.info('settings read from a file (the environment wins over it)', { file: envFile });
      const { runService } = await import('./service.js');
      return runService(config);
    }
    case 'check-config': {
      const envFile = loadEnvFile();
      const config = loadConfig(process.env);
      const { checkEnvironment } = await import('./check-config.js');
      const outcomes = await checkEnvironment(config);
      const failed = outcomes.filter((o) => !o.ok).length;
      process.stdout.write(
        [
          `exitpool ${serviceVersion()} check-config: the configuration is valid${envFile === null ? '' : ` (with settings from ${envFile})`}`,
          ...outcomes.map((o) => `  ${o.ok ? 'ok  ' : 'FAIL'}  ${o.subject}: ${o.detail}`),
          failed === 0 ? 'ready to start' : `${failed} problem${failed === 1 ? '' : 's'}: a start would refuse (exit ${EX_CONFIG})`,
          '',
        ].join('\n'),
      );
      return failed === 0 ? 0 : EX_CONFIG;
    }
    case 'reset-admin-password': {
      loadEnvFile();
      const config = loadConfig(process.env);
      const log = createRootLogger(config.logLevel, config.logFormat);
      const { resetAdminPassword } = await import('./auth/reset-admin-password.js');
      const { password, file } = await resetAdminPassword({ dataDir: config.dataDir, adminPasswordSet: config.adminPassword !== null, log });
      process.stdout.write(
        `new dashboard password for ${config.adminUser}: ${password}\n` +
          `(shown once; its digest is in ${file}. A running service goes on with the old one until it restarts;\n` +
          ' the restart also signs out everyone signed in. Proxy tokens are unchanged.)\n',
      );
      return 0;
    }
    case 'demo': {
      loadEnvFile();
      const { runDemo } = await import('./demo.js');
      return runDemo(process.env);
    }
    default:
      process.stderr.write(`exitpool: unknown command ${JSON.stringify(command)}\n\n${HELP}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    if (e instanceof ConfigError) {
      process.stderr.write(`exitpool: refusing to start: ${e.message}\n`);
      process.exitCode = EX_CONFIG;
      return;
    }
    if (e instanceof AdminPasswordResetRefused || e instanceof AuthStoreCorruptError || e instanceof AuthStorePersistError) {
      process.stderr.write(`exitpool: ${e.message}\n`);
      process.exitCode = EX_CONFIG;
      return;
    }
    if (e instanceof StartupError) {
      process.stderr.write(`exitpool: cannot start: ${e.message}\n`);
      // Whatever was started has been stopped; do not wait for stray handles to drain.
      process.exit(EX_CONFIG);
    }
    process.stderr.write(`exitpool: ${e instanceof Error ? (e.stack ?? e.message) : errorMessage(e)}\n`);
    process.exitCode = 1;
  },
);
