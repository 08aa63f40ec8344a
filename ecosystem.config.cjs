// pm2: `pm2 start ecosystem.config.cjs` (add `--env production`). The supervisor clusters
// itself, so pm2 runs exactly one process in fork mode; kill_timeout leaves tor time to flush.
module.exports = {
  apps: [
    {
      name: 'exitpool',
      script: 'bin/exitpool',
      args: 'serve',
      cwd: __dirname,
      exec_mode: 'fork',
      instances: 1,
      autorestart: true,
      // pm2 sends SIGINT, waits kill_timeout, then SIGKILLs: the supervisor stops the
      // proxies and every tor (each with its own SIGTERM grace) well within this.
      kill_timeout: 30000,
      max_restarts: 10,
      min_uptime: '10s',
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
