// The client side of the benches, in its own process (as browsers and API callers would be), so
// its work never lands in kiln's event loop or the other way round: paged reads over HTTP and
// through pg, WebSocket subscribers on kiln's log stream, and one LISTENing pg client for the raw
// NOTIFY baseline. Live messages carry `t=<process.hrtime ns>` of their send; hrtime is
// CLOCK_MONOTONIC, one clock for every process on the machine, so receive - send is the latency.
import pg from 'pg';
import WebSocket from 'ws';
import { openFrameStream } from './frame-reader.mjs';
import { prng } from './log-lines.mjs';
import { delay, latencySummary, nowMs } from './stats.mjs';

/** Latencies of messages that carry `t=<ns>`, in ms. */
class Recorder {
  constructor(capacity) {
    this.values = new Float64Array(capacity);
    this.count = 0;
    this.overflow = 0;
    this.overOneSecond = 0;
  }

  record(text) {
    const at = text.indexOf('t=');
    if (at < 0) return;
    let end = at + 2;
    while (end < text.length && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
    this.add(BigInt(text.slice(at + 2, end)));
  }

  /**
   * As `record`, for a message held as bytes `start` to `end` of `buffer` that arrived at
   * `receivedNs` (hrtime, as a Number: exact to the nanosecond below 2^53 ns, 104 days of uptime).
   */
  recordBytes(buffer, start, end, receivedNs) {
    const at = buffer.indexOf(T_EQUALS, start + SEQ_AT);
    if (at < 0 || at >= end) return;
    this.note((receivedNs - numberAt(buffer, at + 2, end)) / 1e6);
  }

  add(sent) {
    this.note(Number(process.hrtime.bigint() - sent) / 1e6);
  }

  note(latency) {
    if (latency > 1000) this.overOneSecond++;
    if (this.count < this.values.length) this.values[this.count++] = latency;
    else this.overflow++;
  }

  summary() {
    return {
      ...latencySummary(this.values.subarray(0, this.count)),
      overflow: this.overflow,
      overOneSecond: this.overOneSecond,
    };
  }
}

const T_EQUALS = Buffer.from('t=');
const SEQ = Buffer.from('"seq":');

/** The decimal number at `from` (up to 2^53: hrtime ns and seqs), without making a string. */
function numberAt(buffer, from, end) {
  let value = 0;
  for (let at = from; at < end && buffer[at] >= 48 && buffer[at] <= 57; at++)
    value = value * 10 + buffer[at] - 48;
  return value;
}

/**
 * Where a stream message's seq digits start: `{"build_id":"<36-character uuid>","seq":` is 57
 * bytes, as kiln writes it.
 */
const SEQ_AT = 57;

/** The `"seq":` number of a stream message held as bytes. */
function seqOf(buffer, start, end) {
  if (buffer[start + SEQ_AT - 1] === 0x3a) return numberAt(buffer, start + SEQ_AT, end);
  const at = buffer.indexOf(SEQ, start);
  if (at < 0 || at >= end) return -1;
  return numberAt(buffer, at + SEQ.length, end);
}

let streams;
let idle;
let listener;

const commands = {
  /**
   * Times `samples` pages at random offsets through kiln (GET …/logs over HTTP, to the last byte)
   * and through pg (the same SELECT the repository runs), alternating which goes first.
   */
  async pages({ baseUrl, headers, databaseUrl, buildId, lines, limit, sql, samples, warmup }) {
    const client = new pg.Client({ connectionString: databaseUrl });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const random = prng(11);
      const offset = () => Math.floor(random() * (lines - limit + 1));
      const viaKiln = async (from) => {
        const begin = nowMs();
        const response = await fetch(
          `${baseUrl}/api/v1/builds/${buildId}/logs?offset=${from}&limit=${limit}`,
          { headers },
        );
        const body = await response.text();
        const took = nowMs() - begin;
        if (response.status !== 200 || JSON.parse(body).logs.length !== limit)
          throw new Error(`page at ${from} gave ${response.status}: ${body.slice(0, 200)}`);
        return took;
      };
      const viaSql = async (from) => {
        const begin = nowMs();
        const result = await client.query(sql, [buildId, from]);
        const took = nowMs() - begin;
        if (result.rowCount !== limit) throw new Error(`raw page at ${from}: ${result.rowCount}`);
        return took;
      };
      for (let i = 0; i < warmup; i++) {
        await viaKiln(offset());
        await viaSql(offset());
      }
      const kiln = [];
      const raw = [];
      for (let i = 0; i < samples; i++) {
        // Alternate which goes first, so neither always follows the other's cache misses.
        if (i % 2 === 0) {
          kiln.push(await viaKiln(offset()));
          raw.push(await viaSql(offset()));
        } else {
          raw.push(await viaSql(offset()));
          kiln.push(await viaKiln(offset()));
        }
      }
      return { kiln: latencySummary(kiln), raw: latencySummary(raw) };
    } finally {
      await client.end();
    }
  },

  /**
   * Opens `clients` streams; resolves once every one is open (101). `reader` is `frames` (the
   * minimal frame reader, which also checks every message's seq is one past the previous) or
   * `ws` (the ws library's client).
   */
  async openStreams({ url, headers, clients, capacityPerClient, reader = 'frames' }) {
    const recorder = new Recorder(clients * capacityPerClient);
    const counts = new Array(clients).fill(0);
    const outOfOrder = new Array(clients).fill(0);
    const opened = Array.from({ length: clients }, (_, index) => {
      if (reader === 'frames') {
        const stream = openFrameStream(url, headers, (buffer, start, end, receivedNs) => {
          if (seqOf(buffer, start, end) !== counts[index]) outOfOrder[index]++;
          counts[index]++;
          recorder.recordBytes(buffer, start, end, receivedNs);
        });
        return stream;
      }
      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      ws.on('message', (data) => {
        counts[index]++;
        recorder.record(data.toString('latin1'));
      });
      return {
        terminate: () => ws.terminate(),
        closed: new Promise((done) => ws.once('close', (code) => done(code))),
        opened: new Promise((done, failed) => {
          ws.once('open', () => done());
          ws.once('unexpected-response', (_request, response) =>
            failed(new Error(`stream upgrade refused with HTTP ${response.statusCode}`)),
          );
          ws.once('error', failed);
        }),
      };
    });
    await Promise.all(opened.map((s) => s.opened));
    streams = {
      recorder,
      sockets: opened,
      counts,
      outOfOrder,
      closes: opened.map((s) => s.closed),
    };
    return { opened: opened.length };
  },

  /** Waits until every stream got `expectedPerClient` messages, or `timeoutMs`; returns what arrived. */
  async awaitStreams({ expectedPerClient, timeoutMs }) {
    const deadline = Date.now() + timeoutMs;
    const behind = () => streams.counts.some((n) => n < expectedPerClient);
    while (behind() && Date.now() < deadline) await delay(20);
    return {
      ...streams.recorder.summary(),
      received: streams.counts.reduce((a, b) => a + b, 0),
      outOfOrder: streams.outOfOrder.reduce((a, b) => a + b, 0),
      complete: !behind(),
    };
  },

  /** Waits for the server to close every stream (up to `timeoutMs`); returns the close codes. */
  async closeStreams({ timeoutMs }) {
    const codes = await Promise.race([
      Promise.all(streams.closes),
      delay(timeoutMs).then(() => undefined),
    ]);
    for (const stream of streams.sockets) stream.terminate();
    streams = undefined;
    if (codes === undefined) return { codes: { timeout: 1 } };
    const tally = {};
    for (const code of codes) tally[code] = (tally[code] ?? 0) + 1;
    return { codes: tally };
  },

  /**
   * Opens `perUrl` idle streams on each of `urls` (minimal frame reader, 200 upgrades at a time),
   * adding to those already open; resolves with how many are open.
   */
  async openIdleStreams({ urls, headers, perUrl }) {
    idle ??= [];
    const wanted = urls.flatMap((url) => Array.from({ length: perUrl }, () => url));
    for (let i = 0; i < wanted.length; i += 200) {
      const batch = wanted
        .slice(i, i + 200)
        .map((url) => openFrameStream(url, headers, () => undefined));
      await Promise.all(batch.map((stream) => stream.opened));
      idle.push(...batch);
    }
    return { open: idle.length };
  },

  /** Hangs up every idle stream. */
  closeIdleStreams() {
    for (const stream of idle ?? []) stream.terminate();
    const closed = idle?.length ?? 0;
    idle = undefined;
    return Promise.resolve({ closed });
  },

  /** CPU time this process used so far, in ms. */
  cpu() {
    const { user, system } = process.cpuUsage();
    return Promise.resolve((user + system) / 1000);
  },

  async listen({ url, channel, capacity }) {
    const client = new pg.Client({ connectionString: url });
    client.on('error', () => undefined);
    await client.connect();
    const recorder = new Recorder(capacity);
    client.on('notification', (message) => recorder.record(message.payload ?? ''));
    await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
    listener = { client, recorder };
    return { listening: true };
  },

  async awaitListen({ expected, timeoutMs }) {
    const deadline = Date.now() + timeoutMs;
    while (listener.recorder.count < expected && Date.now() < deadline) await delay(20);
    const summary = {
      ...listener.recorder.summary(),
      received: listener.recorder.count,
      complete: listener.recorder.count >= expected,
    };
    await listener.client.end();
    listener = undefined;
    return summary;
  },
};

process.on('message', ({ id, command, args }) => {
  commands[command](args).then(
    (result) => process.send({ id, result }),
    (error) => process.send({ id, error: error instanceof Error ? error.message : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));
