import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import react from '@vitejs/plugin-react';
import { defineConfig, type Plugin } from 'vite';

const dashboardRoot = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(dashboardRoot, '..');

/**
 * tsc compiles the dashboard's pure logic (for the unit tests) into <outDir>/dashboard/src
 * before Vite runs, so Vite must not empty the directory. Only its own output is replaced:
 * stale hashed bundles from an earlier build are removed here.
 */
function replaceOwnOutput(): Plugin {
  let outDir = '';
  return {
    name: 'exitpool-replace-own-output',
    apply: 'build',
    configResolved(config) {
      outDir = config.build.outDir;
    },
    buildStart() {
      fs.rmSync(path.join(outDir, 'assets'), { recursive: true, force: true });
      fs.rmSync(path.join(outDir, 'index.html'), { force: true });
    },
  };
}

export default defineConfig({
  root: dashboardRoot,
  base: '/',
  plugins: [react(), replaceOwnOutput()],
  build: {
    // Relative to `root`; `--outDir` on the command line is too, so pass an absolute path there.
    outDir: path.join(repoRoot, 'dist', 'dashboard'),
    emptyOutDir: false,
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    fs: { allow: [repoRoot] },
    // `npx vite --config dashboard/vite.config.ts` against a service on the default port.
    proxy: { '/api': 'http://127.0.0.1:8080' },
  },
});
