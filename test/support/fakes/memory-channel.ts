import type { Channel } from '../../../shared/ipc/channel.js';

/** Two connected in-memory channels; messages go through a JSON copy like real IPC. */
export function channelPair(): { a: Channel; b: Channel; cut(): void } {
  const listeners = { a: [] as ((m: unknown) => void)[], b: [] as ((m: unknown) => void)[] };
  const gone = { a: [] as (() => void)[], b: [] as (() => void)[] };
  let connected = true;
  const side = (self: 'a' | 'b', other: 'a' | 'b'): Channel => ({
    send: (m) => {
      if (!connected) throw new Error('channel closed');
      const copy: unknown = JSON.parse(JSON.stringify(m));
      setImmediate(() => listeners[other].forEach((l) => l(copy)));
    },
    onMessage: (l) => void listeners[self].push(l),
    onGone: (l) => void gone[self].push(l),
    connected: () => connected,
  });
  return {
    a: side('a', 'b'),
    b: side('b', 'a'),
    cut: () => {
      connected = false;
      gone.a.forEach((l) => l());
      gone.b.forEach((l) => l());
    },
  };
}
