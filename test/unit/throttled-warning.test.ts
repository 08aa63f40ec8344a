import { expect } from 'chai';
import { ThrottledWarning } from '../../shared/logging/throttled-warning.js';
import type { Logger } from '../../shared/logger.js';

function recorder(): { log: Logger; lines: { level: string; message: string; fields: Record<string, unknown> }[] } {
  const lines: { level: string; message: string; fields: Record<string, unknown> }[] = [];
  const log = { log: (level: string, message: string, fields: Record<string, unknown>) => lines.push({ level, message, fields }) } as unknown as Logger;
  return { log, lines };
}

describe('ThrottledWarning', () => {
  it('writes the first occurrence at once, then at most one line per interval with the count in between', () => {
    const { log, lines } = recorder();
    let now = 0;
    const w = new ThrottledWarning(log, 'credential refused', { intervalMs: 1000, now: () => now });
    w.note({ client: 'a' });
    expect(lines).to.deep.equal([{ level: 'warn', message: 'credential refused', fields: { client: 'a', occurrences: 1 } }]);
    for (let i = 0; i < 3000; i++) w.note({ client: `c${i}` });
    expect(lines).to.have.length(1);
    now = 1000;
    w.note({ client: 'z' });
    expect(lines).to.have.length(2);
    expect(lines[1]?.fields).to.deep.equal({ client: 'z', occurrences: 3001 });
  });

  it('flush writes what is pending and nothing when nothing is', () => {
    const { log, lines } = recorder();
    let now = 0;
    const w = new ThrottledWarning(log, 'x', { intervalMs: 1000, now: () => now, level: 'info' });
    w.flush();
    expect(lines).to.have.length(0);
    w.note();
    w.note();
    w.note();
    w.flush();
    expect(lines.map((l) => l.fields.occurrences)).to.deep.equal([1, 2]);
    expect(lines[1]?.level).to.equal('info');
    now = 5;
    w.flush();
    expect(lines).to.have.length(2);
  });
});
