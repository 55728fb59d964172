require('./resolve-js-suffix.cjs');
module.exports = require('./global-setup.ts').default;
