import { ConfigError, loadConfig } from '../shared/config/index.js';
import { createRootLogger } from '../shared/logger.js';
import { serviceVersion } from '../shared/version.js';

const HELP = `exitpool ${serviceVersion()}: a self-healing pool of Tor exits behind one sticky proxy

Usage: exitpool [command]

Commands:
  serve      run the service, configured from the environment (the default)
  demo       start a private Tor network on loopback and the service on it (offline demo)
  version    print the version
  help       show this help (also --help, -h)

Configuration is read from environment variables; see docs/configuration.md.
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
      const config = loadConfig(process.env);
      createRootLogger(config.logLevel, config.logFormat);
      const { runService } = await import('./service.js');
      return runService(config);
    }
    case 'demo': {
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
      process.exitCode = 78; // EX_CONFIG
      return;
    }
    process.stderr.write(`exitpool: ${(e as Error)?.stack ?? String(e)}\n`);
    process.exitCode = 1;
  },
);
