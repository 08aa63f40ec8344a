/**
 * The username and password a benchmark's client presents through a pass-through proxy (the bare
 * Node relay, HAProxy), which hands them on to the tor instance behind it.
 *
 * Why the yardsticks carry credentials: every client of exitpool must present its proxy token,
 * so its SOCKS5 conversation has a step more than an anonymous one (method username/password,
 * then the credentials and their answer). A relay whose clients skip that step moves fewer
 * messages, and so less CPU per request (measured in docs/performance.md, "Stop 45", "The
 * yardstick's conversation"). With these the relay carries the same conversation as exitpool,
 * so the ratio measures the proxying, not one round trip less.
 *
 * One pair for every client: tor isolates streams by SOCKS credentials (IsolateSOCKSAuth), and
 * one pair keeps one isolation group per instance, as exitpool's own hop to tor (no
 * authentication) has, so tor's side of the paths stays alike.
 */
export const PASS_THROUGH_CREDENTIALS = { username: 'bench-pass-through', password: 'bench' } as const;
