import type { Worker } from 'node:cluster';

/**
 * The transport under an IPC endpoint: a cluster worker seen from the primary, or the
 * primary seen from inside a worker. Kept minimal so tests can use an in-memory pair.
 */
export interface Channel {
  send(message: unknown): void;
  onMessage(listener: (message: unknown) => void): void;
  /** Called once when the other side can no longer receive (disconnect or exit). */
  onGone(listener: () => void): void;
  connected(): boolean;
  /** Resolves once everything sent so far has been written to the channel (before exiting). */
  drain?(): Promise<void>;
}

export function channelToWorker(worker: Worker): Channel {
  return {
    send: (m) => {
      if (worker.isConnected()) worker.send(m as never);
    },
    onMessage: (l) => void worker.on('message', l),
    onGone: (l) => {
      let fired = false;
      const once = (): void => {
        if (!fired) {
          fired = true;
          l();
        }
      };
      worker.on('disconnect', once);
      worker.on('exit', once);
    },
    connected: () => worker.isConnected(),
  };
}

/** The channel a forked process has to its parent (process.send). */
export function channelToParent(): Channel {
  return {
    send: (m) => {
      if (process.connected && process.send) process.send(m as never);
    },
    onMessage: (l) => void process.on('message', l),
    onGone: (l) => void process.once('disconnect', l),
    connected: () => process.connected === true,
    // Messages are written in order, so the callback of an empty marker sent last fires once
    // every earlier message (the final accounting batch) is out.
    drain: () =>
      new Promise<void>((resolve) => {
        if (!process.connected || !process.send) return resolve();
        process.send({ drain: true }, () => resolve());
      }),
  };
}
