import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef } from 'preact/hooks';
import type { Pair } from './draft.js';

/** The DOM id of a field (`manifest.build_config.dockerfile` → `f-manifest-build_config-dockerfile`). */
export const domId = (field: string): string => `f-${field.replace(/\./g, '-')}`;

interface Common {
  readonly field: string;
  readonly label: string;
  /** What stops the user going on, or what the server said about the field. */
  readonly error?: string | undefined;
  readonly hint?: string | undefined;
}

/** The ids the control is described by: its hint, and its message while it has one. */
function describedBy(id: string, hint: string | undefined, error: string | undefined) {
  const ids = [hint !== undefined && `${id}-hint`, error !== undefined && `${id}-error`];
  return ids.filter(Boolean).join(' ') || undefined;
}

function Hint({ id, hint }: { id: string; hint: string | undefined }) {
  return hint === undefined ? null : (
    <p id={`${id}-hint`} class="hint muted">
      {hint}
    </p>
  );
}

/** The field's message; always in the page, so screen readers hear it change (aria-live). */
function Message({ id, error }: { id: string; error: string | undefined }) {
  return (
    <p id={`${id}-error`} class="field-error" aria-live="polite">
      {error ?? ''}
    </p>
  );
}

export function TextField({
  field,
  label,
  error,
  hint,
  value,
  onValue,
  rows,
}: Common & {
  readonly value: string;
  readonly onValue: (value: string) => void;
  /** A multi-line text area of that many rows. */
  readonly rows?: number;
}) {
  const id = domId(field);
  const control = {
    id,
    value,
    'aria-invalid': error !== undefined ? ('true' as const) : undefined,
    'aria-describedby': describedBy(id, hint, error),
    onInput: (event: Event) => onValue((event.currentTarget as HTMLInputElement).value),
  };
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <Hint id={id} hint={hint} />
      {rows === undefined ? (
        <input type="text" {...control} />
      ) : (
        <textarea rows={rows} spellcheck={false} {...control} />
      )}
      <Message id={id} error={error} />
    </div>
  );
}

export function SelectField({
  field,
  label,
  error,
  hint,
  value,
  onValue,
  options,
}: Common & {
  readonly value: string;
  readonly onValue: (value: string) => void;
  readonly options: ReadonlyArray<{ readonly value: string; readonly label: string }>;
}) {
  const id = domId(field);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <Hint id={id} hint={hint} />
      <select
        id={id}
        value={value}
        aria-invalid={error !== undefined ? 'true' : undefined}
        aria-describedby={describedBy(id, hint, error)}
        onChange={(event) => onValue(event.currentTarget.value)}
      >
        {options.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
      <Message id={id} error={error} />
    </div>
  );
}

/** Radio buttons in a fieldset: every choice visible, arrow keys move between them. */
export function RadioField({
  field,
  label,
  error,
  hint,
  value,
  onValue,
  options,
}: Common & {
  readonly value: string;
  readonly onValue: (value: string) => void;
  readonly options: ReadonlyArray<{ readonly value: string; readonly label: ComponentChildren }>;
}) {
  const id = domId(field);
  return (
    <fieldset class="field radios" id={id} aria-describedby={describedBy(id, hint, error)}>
      <legend>{label}</legend>
      <Hint id={id} hint={hint} />
      {options.map((option) => (
        <label key={option.value} class="radio">
          <input
            type="radio"
            name={id}
            value={option.value}
            checked={value === option.value}
            onChange={() => onValue(option.value)}
          />{' '}
          {option.label}
        </label>
      ))}
      <Message id={id} error={error} />
    </fieldset>
  );
}

export function CheckboxField({
  field,
  label,
  hint,
  checked,
  onValue,
}: Omit<Common, 'error'> & { readonly checked: boolean; readonly onValue: (on: boolean) => void }) {
  const id = domId(field);
  return (
    <div class="field">
      <label class="check">
        <input
          type="checkbox"
          id={id}
          checked={checked}
          aria-describedby={hint === undefined ? undefined : `${id}-hint`}
          onChange={(event) => onValue(event.currentTarget.checked)}
        />{' '}
        {label}
      </label>
      <Hint id={id} hint={hint} />
    </div>
  );
}

/** A key=value editor for an object of strings: one row per entry, each control labelled. */
export function PairsField({
  field,
  label,
  error,
  hint,
  pairs,
  onValue,
}: Common & { readonly pairs: readonly Pair[]; readonly onValue: (pairs: Pair[]) => void }) {
  const id = domId(field);
  const set = (index: number, patch: Partial<Pair>) =>
    onValue(pairs.map((pair, at) => (at === index ? { ...pair, ...patch } : pair)));
  // A row added from the keyboard takes the focus, so typing goes on in its name. A layout effect:
  // it runs before the browser handles the next key, so the first character is not lost.
  const added = useRef<number | undefined>(undefined);
  const box = useRef<HTMLFieldSetElement>(null);
  useLayoutEffect(() => {
    if (added.current === undefined) return;
    box.current?.querySelectorAll<HTMLInputElement>('.pair input')[added.current * 2]?.focus();
    added.current = undefined;
  }, [pairs.length]);
  return (
    <fieldset ref={box} class="field pairs" id={id} aria-describedby={describedBy(id, hint, error)}>
      <legend>{label}</legend>
      <Hint id={id} hint={hint} />
      {pairs.map((pair, index) => (
        <div class="pair" key={index}>
          <input
            type="text"
            aria-label={`${label} ${index + 1} name`}
            placeholder="name"
            value={pair.key}
            onInput={(event) => set(index, { key: event.currentTarget.value })}
          />
          <span aria-hidden="true">=</span>
          <input
            type="text"
            aria-label={`${label} ${index + 1} value`}
            placeholder="value"
            value={pair.value}
            onInput={(event) => set(index, { value: event.currentTarget.value })}
          />
          <button
            type="button"
            class="secondary"
            aria-label={`Remove ${label} ${index + 1}`}
            onClick={() => onValue(pairs.filter((_, at) => at !== index))}
          >
            Remove
          </button>
        </div>
      ))}
      <button
        type="button"
        class="secondary"
        onClick={() => {
          added.current = pairs.length;
          onValue([...pairs, { key: '', value: '' }]);
        }}
      >
        Add {label.toLowerCase()}
      </button>
      <Message id={id} error={error} />
    </fieldset>
  );
}
