/**
 * Postgres NOTIFY channels, named once below everything that sends or listens on them (the log
 * store, lifecycle, LogHub). Payloads are small text; listeners read the rows for the rest.
 */

/** New log lines stored: payload `<build id>:<highest seq>`. */
export const LOG_CHANNEL = 'kiln_build_logs';

/** A build's status changed: payload `<build id>:<status>`. */
export const STATUS_CHANNEL = 'kiln_build_status';

/**
 * What decides a user's access changed (a membership, the user's `disabled` flag, the user row),
 * announced by triggers so that writes from any process count: payload `<user id>`, or `*` for
 * every user (a TRUNCATE).
 */
export const ACCESS_CHANNEL = 'kiln_access';
