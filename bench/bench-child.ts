// Entry point of the benchmark's helper processes. Each runs one server in its own process
// (so it gets its own event loop and its own open-files limit, as a tor instance or a
// destination would) and reports its port to the parent over IPC.
import { relayTargetOf, startBareRelay } from './bare-relay.js';
import { startDownloadSource } from './download-source.js';
import { startLeanSocksBackend } from './lean-socks-backend.js';
import type { ChildReady, ChildRole } from './child-server.js';

async function start(role: ChildRole, args: string[]): Promise<{ port: number; close(): Promise<void> }> {
  switch (role) {
    case 'socks-backend':
      return startLeanSocksBackend();
    case 'download-source':
      return startDownloadSource();
    case 'bare-relay':
      return startBareRelay(args.map(relayTargetOf));
  }
}

async function main(): Promise<void> {
  const [role, ...args] = process.argv.slice(2) as [ChildRole, ...string[]];
  const server = await start(role, args);
  // The parent owns this process: when it goes away (or says so), so do we.
  const stop = (): void => {
    void server.close().finally(() => process.exit(0));
  };
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
  const ready: ChildReady = { port: server.port, pid: process.pid };
  process.send?.(ready);
}

main().catch((e: unknown) => {
  console.error('bench child failed:', e);
  process.exit(1);
});
