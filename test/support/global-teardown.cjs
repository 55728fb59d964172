require('./resolve-js-suffix.cjs');
module.exports = require('./global-teardown.ts').default;
