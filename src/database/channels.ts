/**
 * Postgres NOTIFY channels, named once below everything that sends or listens on them (the log
 * store, lifecycle, LogHub). Payloads are small text; listeners read the rows for the rest.
 */

/** New log lines stored: payload `<build id>:<highest seq>`. */
export const LOG_CHANNEL = 'kiln_build_logs';

/** A build's status changed: payload `<build id>:<status>`. */
export const STATUS_CHANNEL = 'kiln_build_status';
