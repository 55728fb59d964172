import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../../api/client.js';
import { ErrorNotice } from '../../components/error-notice.js';

/** A page the role may not use (a typed URL, or a role changed meanwhile): says so, and who can help. */
export function NotAllowed({ title, what }: { title: string; what: string }) {
  return (
    <main id="main" class="narrow">
      <h1>{title}</h1>
      <p class="error" role="alert">
        Your role in this tenant cannot {what}. Ask a tenant administrator if you need to.
      </p>
    </main>
  );
}

/**
 * A destructive action behind a second click: `action…` opens the question, then the danger
 * button does it or Cancel closes it. Focus moves into the question and back, so a keyboard user
 * is never left on a button that went away.
 */
export function Confirm({
  action,
  question,
  confirm,
  onConfirm,
}: {
  /** The first button's words, e.g. "Remove". */
  action: string;
  question: ComponentChildren;
  /** The danger button's words, naming what goes, e.g. "Remove bob@example.com". */
  confirm: string;
  onConfirm: () => void;
}) {
  const [asking, setAsking] = useState(false);
  const first = useRef<HTMLButtonElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  const opened = useRef(false);
  useEffect(() => {
    if (asking) first.current?.focus();
    else if (opened.current) opener.current?.focus();
    opened.current = asking;
  }, [asking]);
  if (!asking) {
    return (
      <button ref={opener} type="button" class="danger" onClick={() => setAsking(true)}>
        {action}…
      </button>
    );
  }
  return (
    <div class="confirm" role="group" aria-label={`Confirm: ${confirm}`}>
      <p>{question}</p>
      <button
        ref={first}
        type="button"
        class="danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirm}
      </button>
      <button type="button" class="secondary" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </div>
  );
}

export interface Outcome {
  /** What the last action did, for the page's status line. */
  readonly done: string;
  /** The last refusal, for an ErrorNotice. */
  readonly error: ApiError | undefined;
  readonly busy: boolean;
  /**
   * Runs `call`; on success says `message` and returns true, on an API refusal keeps it in
   * `error` (or hands it to `refused`, which returns whether it showed it itself) and returns false.
   */
  run(
    call: () => Promise<unknown>,
    message: string,
    refused?: (error: ApiError) => boolean,
  ): Promise<boolean>;
  clear(): void;
}

/** One form's or row's action state: busy, what it did, what the API refused. */
export function useOutcome(): Outcome {
  const [done, setDone] = useState('');
  const [error, setError] = useState<ApiError | undefined>();
  const [busy, setBusy] = useState(false);
  return {
    done,
    error,
    busy,
    clear() {
      setDone('');
      setError(undefined);
    },
    async run(call, message, refused) {
      setBusy(true);
      setDone('');
      setError(undefined);
      try {
        await call();
        setDone(message);
        return true;
      } catch (failure) {
        if (!(failure instanceof ApiError)) throw failure;
        if (refused === undefined || !refused(failure)) setError(failure);
        return false;
      } finally {
        setBusy(false);
      }
    },
  };
}

/** The status line every form has: always in the page, so screen readers hear it change. */
export function Done({ text }: { text: string }) {
  return (
    <p role="status" class="done">
      {text}
    </p>
  );
}

/** An action's status line and, when the API refused it, its message. */
export function OutcomeLines({ outcome }: { outcome: Outcome }) {
  return (
    <>
      <Done text={outcome.done} />
      {outcome.error !== undefined && <ErrorNotice error={outcome.error} />}
    </>
  );
}
