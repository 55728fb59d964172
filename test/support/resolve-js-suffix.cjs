// Jest's globalSetup/globalTeardown are loaded without moduleNameMapper, so the `.js` suffixes that
// ESM TypeScript needs on relative imports do not resolve to the `.ts` sources. Try without them.
const Module = require('node:module');

const original = Module._resolveFilename;
if (!original.kilnPatched) {
  Module._resolveFilename = function resolveWithoutJsSuffix(request, ...rest) {
    try {
      return original.call(this, request, ...rest);
    } catch (error) {
      if (request.startsWith('.') && request.endsWith('.js')) {
        return original.call(this, request.slice(0, -3), ...rest);
      }
      throw error;
    }
  };
  Module._resolveFilename.kilnPatched = true;
}
