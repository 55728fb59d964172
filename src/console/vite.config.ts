import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The console is built into dist/console/ after `nest build` (which empties dist/), and served by
 * the api role at `/` (src/console-host/). No inline script or style is emitted, so the page runs
 * under a Content-Security-Policy without 'unsafe-inline'.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  build: {
    outDir: fileURLToPath(new URL('../../dist/console', import.meta.url)),
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: true,
    target: 'es2022',
  },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
});
