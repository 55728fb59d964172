/** The levels of a LogEntry. */
export const LOG_LEVELS = ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const;
export type LogEntryLevel = (typeof LOG_LEVELS)[number];

/** A stored log line: `seq` is dense per build from 0 and is the HTTP offset. */
export interface StoredLogLine {
  readonly seq: number;
  readonly ts: Date;
  readonly level: LogEntryLevel;
  readonly message: string;
  readonly metadata: Record<string, string> | null;
}

/** A log line as HTTP pages serve it (the WebSocket adds build_id and seq). */
export interface LogEntryDto {
  timestamp: string;
  level: LogEntryLevel;
  message: string;
  metadata: Record<string, string> | null;
}

export function toLogEntry(line: StoredLogLine): LogEntryDto {
  return {
    timestamp: line.ts.toISOString(),
    level: line.level,
    message: line.message,
    metadata: line.metadata,
  };
}

export function toStreamMessage(
  buildId: string,
  line: StoredLogLine,
): LogEntryDto & { build_id: string; seq: number } {
  return { build_id: buildId, seq: line.seq, ...toLogEntry(line) };
}
