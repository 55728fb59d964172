// WebSocket subscribers for the soak bench, in their own process so their memory and CPU are not
// counted as kiln's. Each `watch` message opens `count` streams on one build and answers with the
// lines each received and how each closed.
import WebSocket from 'ws';

function watch({ baseUrl, headers, buildId, count }) {
  const url = `${baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream`;
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise((done) => {
          let lines = 0;
          const socket = new WebSocket(url, { headers });
          socket.on('message', () => lines++);
          socket.on('error', () => undefined);
          socket.on('close', (code, reason) => done({ lines, code, reason: reason.toString() }));
        }),
    ),
  );
}

process.on('message', (message) => {
  watch(message).then(
    (streams) => process.send({ id: message.id, streams }),
    (error) => process.send({ id: message.id, error: String(error) }),
  );
});
