import { mkdirSync, openSync, readFileSync, unlinkSync, writeSync, closeSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PortBlockUnavailableError } from './errors.js';
import { isProcessAlive, processStartTime } from '../../shared/process/foreign-processes.js';
import { PORT_BLOCK_SIZE, type PlannedEndpoint } from './topology.js';

/**
 * Lock files shared by every process on the machine: several people (or CI jobs) start
 * networks at the same time, and a free-port check alone races between check and bind.
 */
const LOCK_DIR = path.join(os.tmpdir(), 'exitpool-testnet-ports');
const MAX_AUTO_ATTEMPTS = 200;

export interface PortBlockRequest {
  readonly basePort: number;
  /** true when the caller asked for this base explicitly: never move to another block. */
  readonly exact: boolean;
  readonly span: number;
  readonly endpointsFor: (basePort: number) => readonly PlannedEndpoint[];
}

export interface PortBlock {
  readonly basePort: number;
  release(): void;
}

interface LockOwner {
  pid: number;
  startTime: string | undefined;
}

function lockPath(blockIndex: number): string {
  return path.join(LOCK_DIR, `${blockIndex}.lock`);
}

function readLockOwner(file: string): LockOwner | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'pid' in parsed && typeof parsed.pid === 'number') {
      const startTime = 'startTime' in parsed && typeof parsed.startTime === 'string' ? parsed.startTime : undefined;
      return { pid: parsed.pid, startTime };
    }
  } catch {
    // unreadable or half-written lock: treated as stale below
  }
  return undefined;
}

function tryLock(blockIndex: number): boolean {
  const file = lockPath(blockIndex);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o644);
      writeSync(fd, JSON.stringify({ pid: process.pid, startTime: processStartTime(process.pid) }));
      closeSync(fd);
      heldBlocks.add(blockIndex);
      if (!exitReleaseInstalled) {
        exitReleaseInstalled = true;
        process.on('exit', releaseHeldBlocksAtExit);
      }
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = readLockOwner(file);
      if (owner && isProcessAlive(owner.pid, owner.startTime)) return false;
      try {
        unlinkSync(file);
      } catch {
        // another process removed the stale lock first; retry the exclusive create
      }
    }
  }
  return false;
}

/** Blocks this process holds, released even if it exits without stop() (a SIGKILL leaves a stale lock, which is detected). */
const heldBlocks = new Set<number>();
let exitReleaseInstalled = false;

function releaseHeldBlocksAtExit(): void {
  for (const block of heldBlocks) unlock(block);
}

function unlock(blockIndex: number): void {
  heldBlocks.delete(blockIndex);
  const file = lockPath(blockIndex);
  const owner = readLockOwner(file);
  if (owner?.pid === process.pid) {
    try {
      unlinkSync(file);
    } catch {
      // already gone
    }
  }
}

function endpointFree(endpoint: PlannedEndpoint): Promise<boolean> {
  return new Promise((resolve) => {
    if (endpoint.protocol === 'udp') {
      const socket = createSocket('udp4');
      socket.once('error', () => {
        socket.close();
        resolve(false);
      });
      socket.bind(endpoint.port, endpoint.address, () => socket.close(() => resolve(true)));
      return;
    }
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port: endpoint.port, host: endpoint.address, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

async function busyEndpoints(endpoints: readonly PlannedEndpoint[]): Promise<PlannedEndpoint[]> {
  const results = await Promise.all(endpoints.map(async (e) => ({ e, free: await endpointFree(e) })));
  return results.filter((r) => !r.free).map((r) => r.e);
}

/**
 * Reserves a block of ports: lock files for every PORT_BLOCK_SIZE-aligned block the span
 * touches, then a bind check of every endpoint. Without an exact base it walks upwards.
 */
export async function reservePortBlock(request: PortBlockRequest): Promise<PortBlock> {
  mkdirSync(LOCK_DIR, { recursive: true });
  const attempts = request.exact ? 1 : MAX_AUTO_ATTEMPTS;
  let lastDetail = 'no attempt made';
  for (let attempt = 0; attempt < attempts; attempt++) {
    const base = request.basePort + attempt * PORT_BLOCK_SIZE;
    if (base + request.span - 1 > 65535) break;
    const firstBlock = Math.floor(base / PORT_BLOCK_SIZE);
    const lastBlock = Math.floor((base + request.span - 1) / PORT_BLOCK_SIZE);
    const locked: number[] = [];
    let allLocked = true;
    for (let block = firstBlock; block <= lastBlock; block++) {
      if (!tryLock(block)) {
        allLocked = false;
        break;
      }
      locked.push(block);
    }
    const releaseLocks = (): void => locked.forEach(unlock);
    if (!allLocked) {
      releaseLocks();
      lastDetail = 'reserved by another running network';
      continue;
    }
    const busy = await busyEndpoints(request.endpointsFor(base));
    if (busy.length > 0) {
      releaseLocks();
      lastDetail = `in use: ${busy.map((e) => `${e.protocol}/${e.address}:${e.port}`).join(', ')}`;
      continue;
    }
    let released = false;
    return {
      basePort: base,
      release: () => {
        if (released) return;
        released = true;
        releaseLocks();
      },
    };
  }
  throw new PortBlockUnavailableError(request.basePort, lastDetail);
}
