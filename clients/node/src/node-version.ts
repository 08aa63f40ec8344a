/**
 * The oldest Node.js this package runs on: that of undici 8, its HTTP client (older Node fails
 * deep inside undici, e.g. "Cannot read properties of undefined (reading 'bind')"). Every entry
 * point imports this module first, so an older Node stops here with a message that says why:
 * ES modules are evaluated in import order, and this one imports nothing.
 */
export const SUPPORTED_NODE = '22.19.0';

/** The message for a Node.js older than SUPPORTED_NODE, or null when `version` (process.versions.node) is supported. */
export function unsupportedNodeMessage(version: string): string | null {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map((p) => Number.parseInt(p, 10));
  const [wantMajor, wantMinor, wantPatch] = SUPPORTED_NODE.split('.').map(Number) as [number, number, number];
  const older = major !== wantMajor ? major < wantMajor : minor !== wantMinor ? minor < wantMinor : patch < wantPatch;
  return older ? `@exitpool/client needs Node.js ${SUPPORTED_NODE} or later; this is Node.js ${version}. Its HTTP client, undici 8, does not run on older versions.` : null;
}

const message = unsupportedNodeMessage(process.versions.node);
if (message !== null) throw new Error(message);
