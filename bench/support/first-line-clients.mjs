// The client side of bench/first-line.bench.mjs, in its own process (as a browser watching a
// build would be): a WebSocket on the build's live log, opened before `POST …/start`, timing the
// first message and the first message a given container printed; and the operator's baseline
// without kiln, a Job created and its pod's log followed over raw HTTP against the Kubernetes API
// server double. Times are CLOCK_MONOTONIC ms (process.hrtime), the clock every process on the
// machine shares, so the bench compares them with its own.
import http from 'node:http';
import https from 'node:https';
import WebSocket from 'ws';
import { nowMs } from './stats.mjs';
import { answerCommands } from './commands.mjs';

process.on('disconnect', () => process.exit(1));

/**
 * Opens the build's live log, then starts the build: the times (from the start request sent) of
 * the first message and of the first message whose metadata.container is `container`; resolves
 * once both arrived (or the stream closed), with how it closed.
 */
function firstLine({ baseUrl, headers, buildId, container, timeoutMs }) {
  const url = `${baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream`;
  return new Promise((done, fail) => {
    const socket = new WebSocket(url, { headers });
    let sentAt;
    let first;
    let firstOfContainer;
    let firstText;
    let containerText;
    const timer = setTimeout(() => {
      socket.terminate();
      fail(new Error(`no line of container ${container} within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = (closed) => {
      clearTimeout(timer);
      socket.terminate();
      done({
        sentAt,
        firstMs: first === undefined ? null : first - sentAt,
        containerMs: firstOfContainer === undefined ? null : firstOfContainer - sentAt,
        firstText,
        containerText,
        closed,
      });
    };
    socket.on('message', (data) => {
      const at = nowMs();
      if (first === undefined) {
        first = at;
        firstText = JSON.parse(data.toString()).message;
      }
      if (firstOfContainer !== undefined) return;
      const message = JSON.parse(data.toString());
      if (message.metadata?.container !== container) return;
      firstOfContainer = at;
      containerText = message.message;
      finish(undefined);
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      fail(error);
    });
    socket.on('close', (code, reason) => {
      if (firstOfContainer === undefined) finish(`${code} ${reason.toString()}`);
    });
    socket.on('open', () => {
      sentAt = nowMs();
      fetch(`${baseUrl}/api/v1/builds/${buildId}/start`, { method: 'POST', headers }).then(
        async (response) => {
          if (!response.ok)
            fail(new Error(`start gave ${response.status}: ${await response.text()}`));
        },
        fail,
      );
    });
  });
}

/** Waits until the stream of build `buildId` closes (the build ended); its close code. */
function untilClosed({ baseUrl, headers, buildId, timeoutMs }) {
  const url = `${baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream`;
  return new Promise((done) => {
    const socket = new WebSocket(url, { headers });
    const timer = setTimeout(() => {
      socket.terminate();
      done('timed out');
    }, timeoutMs);
    socket.on('message', () => undefined);
    socket.on('error', () => undefined);
    socket.on('close', (code, reason) => {
      clearTimeout(timer);
      done(`${code} ${reason.toString()}`);
    });
  });
}

// ---- the operator's baseline: a Job and its pod's log, without kiln -------------------------

function kubeRequest(server, method, path, body) {
  const url = new URL(path, server);
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((done, fail) => {
    const request = transport.request(
      url,
      {
        method,
        headers: {
          authorization: 'Bearer bench',
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        rejectUnauthorized: false,
      },
      (response) => done(response),
    );
    request.on('error', fail);
    request.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

async function readJson(response) {
  let text = '';
  response.setEncoding('utf8');
  for await (const chunk of response) text += chunk;
  if (response.statusCode >= 300) throw new Error(`${response.statusCode}: ${text}`);
  return JSON.parse(text);
}

/** Calls `onLine` for each '\n'-ended line of a streamed response, until it returns true. */
async function eachLine(response, onLine) {
  let carry = '';
  response.setEncoding('utf8');
  for await (const chunk of response) {
    const parts = (carry + chunk).split('\n');
    carry = parts.pop() ?? '';
    for (const line of parts) if (line !== '' && onLine(line)) return true;
  }
  return false;
}

/**
 * What a client without kiln does to see a build's first line: create the Job, watch for its pod
 * until `container` runs (or ran), then follow that container's log until its first line. The
 * times are from the create request sent.
 */
async function baselineJob({ server, namespace, body, container }) {
  const sentAt = nowMs();
  const job = await readJson(
    await kubeRequest(server, 'POST', `/apis/batch/v1/namespaces/${namespace}/jobs`, body),
  );
  const selector = encodeURIComponent(`job-name=${job.metadata.name}`);
  const watch = await kubeRequest(
    server,
    'GET',
    `/api/v1/namespaces/${namespace}/pods?watch=true&labelSelector=${selector}`,
  );
  let podName;
  await eachLine(watch, (line) => {
    const { object } = JSON.parse(line);
    const statuses = [
      ...(object.status?.initContainerStatuses ?? []),
      ...(object.status?.containerStatuses ?? []),
    ];
    const state = statuses.find((s) => s.name === container)?.state;
    if (state?.running === undefined && state?.terminated === undefined) return false;
    podName = object.metadata.name;
    return true;
  });
  watch.destroy();
  const podRunningMs = nowMs() - sentAt;
  const log = await kubeRequest(
    server,
    'GET',
    `/api/v1/namespaces/${namespace}/pods/${podName}/log?follow=true&container=${container}`,
  );
  let text;
  await eachLine(log, (line) => {
    text = line;
    return true;
  });
  const firstLineMs = nowMs() - sentAt;
  log.destroy();
  return { sentAt, podRunningMs, firstLineMs, text, podName };
}

const commands = { firstLine, untilClosed, baselineJob };

answerCommands(commands);
