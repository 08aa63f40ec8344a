/**
 * The load tests' destination, run as its own process so that its ten thousand accepted
 * sockets do not count against the test process's descriptor limit: a TCP echo server on
 * 127.0.0.1. Prints `{"port":N}` once listening; answers each `stats` line on stdin with
 * `{"accepted":A,"open":O}`; exits when stdin closes.
 */
import net from 'node:net';
import readline from 'node:readline';

let accepted = 0;
const open = new Set<net.Socket>();
const server = net.createServer({ noDelay: true }, (socket) => {
  accepted += 1;
  open.add(socket);
  socket.on('error', () => undefined);
  socket.once('close', () => open.delete(socket));
  socket.pipe(socket);
});
server.on('error', (e) => {
  process.stderr.write(`echo server error: ${e.message}\n`);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as net.AddressInfo).port })}\n`);
});

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (line.trim() === 'stats') process.stdout.write(`${JSON.stringify({ accepted, open: open.size })}\n`);
});
lines.on('close', () => {
  for (const s of open) s.destroy();
  server.close(() => process.exit(0));
});
