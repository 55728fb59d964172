import { LogCapture } from '../../test/support/log-capture.js';
import { runWithRequestContext } from './request-context.js';

describe('createLogger', () => {
  it('redacts credentials wherever they sit in a log object', () => {
    const capture = new LogCapture('info');

    capture.logger.info(
      {
        req: {
          headers: {
            authorization: 'Bearer eyJhbGciOi.secret.sig',
            cookie: 'session=1',
            accept: 'json',
          },
        },
        headers: { authorization: 'Basic dXNlcjpwYXNz' },
        body: { email: 'a@example.com', password: 'hunter2' },
        password: 'top',
        token: 'tok',
      },
      'incoming',
    );

    const [line] = capture.raw;
    expect(line).not.toMatch(/eyJhbGciOi|dXNlcjpwYXNz|hunter2|session=1|"top"|"tok"/);
    expect(capture.lines[0]).toMatchObject({
      req: { headers: { authorization: '[redacted]', cookie: '[redacted]', accept: 'json' } },
      body: { email: 'a@example.com', password: '[redacted]' },
    });
  });

  it('stamps every line written during a request with its request id', () => {
    const capture = new LogCapture('info');

    runWithRequestContext({ requestId: 'req-42' }, () => capture.logger.info('inside'));
    capture.logger.info('outside');

    expect(capture.lines.map((l) => l['request_id'])).toEqual(['req-42', undefined]);
  });
});
