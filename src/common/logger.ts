import type { LoggerService } from '@nestjs/common';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config/config.js';
import { currentRequestContext } from './request-context.js';

/** Paths pino replaces with "[redacted]" wherever they appear in a log object. */
export const REDACTED_PATHS = [
  'authorization',
  'password',
  'token',
  'secret',
  'access_token',
  'headers.authorization',
  'headers.cookie',
  'headers["sec-websocket-protocol"]',
  '*.authorization',
  '*.password',
  '*.token',
  '*.secret',
  '*.access_token',
  '*.headers.authorization',
  '*.headers.cookie',
  'req.headers.authorization',
  'req.headers.cookie',
  'DATABASE_URL',
  'databaseUrl',
  '*.databaseUrl',
  'url.password',
];

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'kiln' },
      messageKey: 'msg',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      mixin: () => ({ ...requestFields(), ...traceFields() }),
    },
    destination,
  );
}

function requestFields(): { request_id?: string } {
  const ctx = currentRequestContext();
  return ctx ? { request_id: ctx.requestId } : {};
}

/**
 * The OpenTelemetry trace and span a line was written in (docs/adr/0052-tracing.md). Not
 * `trace_id`: in kiln's Error body and log lines that name is the request id. With tracing off
 * no span is ever active and nothing is added.
 */
function traceFields(): { otel_trace_id?: string; otel_span_id?: string } {
  const span = trace.getActiveSpan()?.spanContext();
  return span !== undefined && isSpanContextValid(span)
    ? { otel_trace_id: span.traceId, otel_span_id: span.spanId }
    : {};
}

/** Routes Nest's own log calls (bootstrap, route mapping, exceptions) into pino. */
export class NestPinoLogger implements LoggerService {
  constructor(private readonly logger: Logger) {}

  log(message: unknown, ...optional: unknown[]): void {
    this.write('info', message, optional);
  }
  error(message: unknown, ...optional: unknown[]): void {
    this.write('error', message, optional);
  }
  warn(message: unknown, ...optional: unknown[]): void {
    this.write('warn', message, optional);
  }
  debug(message: unknown, ...optional: unknown[]): void {
    this.write('debug', message, optional);
  }
  verbose(message: unknown, ...optional: unknown[]): void {
    this.write('trace', message, optional);
  }
  fatal(message: unknown, ...optional: unknown[]): void {
    this.write('fatal', message, optional);
  }

  private write(
    level: 'info' | 'error' | 'warn' | 'debug' | 'trace' | 'fatal',
    message: unknown,
    optional: unknown[],
  ) {
    // Nest passes the context (class name) last, and for errors a stack before it.
    const context = typeof optional.at(-1) === 'string' ? (optional.at(-1) as string) : undefined;
    const fields: Record<string, unknown> = context === undefined ? {} : { context };
    if (message instanceof Error) {
      this.logger[level]({ ...fields, err: message }, message.message);
    } else if (typeof message === 'string') {
      this.logger[level](fields, message);
    } else {
      this.logger[level]({ ...fields, data: message });
    }
  }
}

/** DI token of the application's pino logger. */
export const LOGGER = Symbol('LOGGER');
