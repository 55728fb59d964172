import { type Dispatcher, fetch } from 'undici';
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
      const response = await fetch(url, {
        headers,
        signal,
        ...(dispatcher === undefined ? {} : { dispatcher: dispatcher as Dispatcher }),
      });
      if (!response.ok) {
        // Status bodies read as client-node's errors are: KubeApiError, or unavailable on 5xx.
        throw toKubeError({ code: response.status, body: await response.text() });
      }
      if (response.body === null) return;
      const decoder = new TextDecoder();
      for await (const chunk of response.body) {
        const text = decoder.decode(chunk as Uint8Array, { stream: true });
        // A promise from onText holds the stream: nothing more is read (and TCP's window
        // closes towards the server) until the reader has caught up.
        if (text !== '') await onText(text);
      }
      const rest = decoder.decode();
      if (rest !== '') await onText(rest);
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      throw toKubeError(error);
    }
  }
}
