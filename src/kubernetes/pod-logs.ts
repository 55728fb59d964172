import { type Dispatcher, request } from 'undici';
import { toKubeError } from './errors.js';
import { type KubeClient, segment } from './kube-client.js';

export interface PodContainerRef {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
}

export interface PodLogOptions {
  /** Keep the stream open while the container runs. */
  readonly follow: boolean;
  /** RFC 3339; the server filters at whole seconds. */
  readonly sinceTime?: string;
}

/**
 * What the reader is handed at most at a time. A chunk read from the socket can be as large as
 * the body's buffer (HIGH_WATER_MARK): handing it in pieces keeps what a paused reader holds past
 * its own bound to one piece, as small as the chunks fetch used to hand on.
 */
export const PIECE_BYTES = 16 * 1024;

/**
 * How much of a response body undici buffers before it pauses its parser. The parser pauses in
 * the middle of a socket read, and each resume copies everything the socket still buffers into a
 * new Buffer (and into the parser's memory): fetch's body stream, whose mark is 0, paused after
 * every HTTP chunk the kubelet wrote, so a stream that fell behind cost a copy of its whole socket
 * buffer per chunk and fell further behind (docs/benchmarks.md, 200 pods × 500 lines/s). With a
 * mark, undici pauses once per mark's worth of body; each stream buffers at most that much
 * outside kiln's budget (12.5 MiB for 200 streams).
 */
const HIGH_WATER_MARK = 64 * 1024;

/**
 * A container's log with `timestamps=true`, chunk by chunk as the server sends it. Unlike
 * client-node's Log (which pipes the body and hides a cut connection), the promise rejects when
 * the connection breaks and resolves only when the server ended the response.
 */
export class PodLogs {
  constructor(private readonly client: KubeClient) {}

  async stream(
    ref: PodContainerRef,
    options: PodLogOptions,
    onText: (text: string) => void | Promise<void>,
    signal: AbortSignal,
  ): Promise<void> {
    const path = `/api/v1/namespaces/${segment(ref.namespace)}/pods/${segment(ref.pod)}/log`;
    try {
      const { url, headers, dispatcher } = await this.client.rawRequest(path);
      url.searchParams.set('container', ref.container);
      url.searchParams.set('timestamps', 'true');
      if (options.follow) url.searchParams.set('follow', 'true');
      if (options.sinceTime !== undefined) url.searchParams.set('sinceTime', options.sinceTime);
      const response = await request(url, {
        headers,
        signal,
        highWaterMark: HIGH_WATER_MARK,
        ...(dispatcher === undefined ? {} : { dispatcher: dispatcher as Dispatcher }),
      });
      if (response.statusCode >= 300) {
        // Status bodies read as client-node's errors are: KubeApiError, or unavailable on 5xx.
        throw toKubeError({ code: response.statusCode, body: await response.body.text() });
      }
      const decoder = new TextDecoder();
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        for (let at = 0; at < chunk.length; at += PIECE_BYTES) {
          const text = decoder.decode(chunk.subarray(at, at + PIECE_BYTES), { stream: true });
          // A promise from onText holds the stream: nothing more is read (and TCP's window
          // closes towards the server) until the reader has caught up.
          if (text !== '') await onText(text);
        }
      }
      const rest = decoder.decode();
      if (rest !== '') await onText(rest);
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      throw toKubeError(error);
    }
  }
}
