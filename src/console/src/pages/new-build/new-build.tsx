import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, tenantHeader, unwrap } from '../../api/client.js';
import type { components } from '../../api/schema.gen.js';
import { session } from '../../api/session.js';
import { ErrorNotice } from '../../components/error-notice.js';
import { can } from '../../permissions.js';
import { navigate } from '../../router.js';
import { emptyDraft } from './draft.js';
import { type Saved, clearDraft, loadDraft, saveDraft } from './draft-store.js';
import { requestBody } from './manifest.js';
import {
  ConfigStep,
  MethodFieldsStep,
  MethodStep,
  SourceStep,
  StartStep,
  type StepProps,
  TagsStep,
} from './steps.js';
import {
  FIELD_STEPS,
  type FieldId,
  type Problems,
  STEP_TITLES,
  type StepId,
  fieldOf,
  problemsOf,
  stepsOf,
} from './validation.js';

type Schemas = components['schemas'];
type CreateBody = Schemas['ReferenceCreateBuildDto'] | Schemas['WizardCreateBuildDto'];

/** /builds/new: the New build wizard, for roles that may create builds. */
export function NewBuild() {
  if (!can('build:create')) {
    return (
      <main id="main" class="narrow">
        <h1>New build</h1>
        <p class="error" role="alert">
          Your role in this tenant cannot create builds. Ask a tenant administrator if you need to.
        </p>
      </main>
    );
  }
  return <Wizard tenantId={session()!.tenantId!} />;
}

/** What the server refused that no field shows (a 400's details), listed on the review step. */
type Unplaced = ReadonlyArray<readonly [string, string]>;

/**
 * One step at a time; Next is enabled only when the step's fields meet the wizard's conditions. The
 * review step shows the exact body that "Create build" sends; a 400 is mapped back onto fields.
 */
function Wizard({ tenantId }: { tenantId: string }) {
  const [saved, setSaved] = useState<Saved>(
    () => loadDraft(tenantId) ?? { draft: emptyDraft(), step: 'start' },
  );
  const [projects, setProjects] = useState<Array<{ id: string; name: string }> | undefined>();
  const [serverProblems, setServerProblems] = useState<Problems>({});
  const [unplaced, setUnplaced] = useState<Unplaced>([]);
  const [failure, setFailure] = useState<ApiError | undefined>();
  const [sending, setSending] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  const firstRender = useRef(true);

  const { draft } = saved;
  const steps = stepsOf(draft);
  const step = steps.includes(saved.step) ? saved.step : 'start';
  const index = steps.indexOf(step);
  const problems = problemsOf(draft, step);
  const blocked = Object.keys(problems).length > 0;

  useEffect(() => saveDraft(tenantId, saved), [tenantId, saved]);
  useEffect(() => {
    unwrap(api.GET('/api/v1/projects', { params: { header: tenantHeader() } })).then(
      (answer) => setProjects(answer.projects),
      (error: unknown) => error instanceof ApiError && setFailure(error),
    );
  }, []);
  // Focus follows the step (not on the first render: the page keeps the browser's focus).
  useEffect(() => {
    if (firstRender.current) firstRender.current = false;
    else heading.current?.focus();
  }, [step]);

  const go = (next: StepId) => setSaved((current) => ({ ...current, step: next }));
  const change: StepProps['change'] = (field, patch) => {
    setSaved((current) => ({ ...current, draft: { ...current.draft, ...patch } }));
    setServerProblems(({ [field as FieldId]: _, ...rest }) => rest);
  };
  const errorOf = (field: FieldId) => problems[field] ?? serverProblems[field];

  async function create(): Promise<void> {
    setSending(true);
    setFailure(undefined);
    setUnplaced([]);
    try {
      const body: CreateBody = requestBody(draft, tenantId);
      const created = await unwrap(
        api.POST('/api/v1/builds', { params: { header: tenantHeader() }, body }),
      );
      clearDraft();
      navigate(`/builds/${'data' in created ? created.data.id : created.id}`);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.status === 400 && Object.keys(error.details).length > 0) showRefusal(error);
      else setFailure(error);
    } finally {
      setSending(false);
    }
  }

  /** A 400's details on their fields; back to the first step holding one. */
  function showRefusal(error: ApiError): void {
    const placed: Problems = {};
    const rest: Array<[string, string]> = [];
    for (const [key, message] of Object.entries(error.details)) {
      const field = fieldOf(key);
      if (field !== undefined && steps.includes(FIELD_STEPS[field])) placed[field] ??= message;
      else rest.push([key, message]);
    }
    setServerProblems(placed);
    setUnplaced(rest);
    const first = steps.find((s) =>
      Object.keys(placed).some((f) => FIELD_STEPS[f as FieldId] === s),
    );
    if (first !== undefined) go(first);
    else if (rest.length === 0) setFailure(error);
  }

  const props: StepProps = { draft, change, errorOf };
  const body = requestBody(draft, tenantId);
  return (
    <main id="main" class="wizard">
      <h1>New build</h1>
      <StepList steps={steps} step={step} />
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (step === 'review') void create();
          else if (!blocked) go(steps[index + 1]!);
        }}
      >
        <h2 ref={heading} tabIndex={-1}>
          Step {index + 1} of {steps.length}: {STEP_TITLES[step]}
        </h2>
        <StepBody step={step} props={props} projects={projects} body={body} unplaced={unplaced} />
        {failure !== undefined && <ErrorNotice error={failure} />}
        <WizardNav
          onBack={index > 0 ? () => go(steps[index - 1]!) : undefined}
          review={step === 'review'}
          sending={sending}
          blocked={blocked}
        />
      </form>
    </main>
  );
}

/** Every step of this draft, numbered; the one shown is the current one. */
function StepList({ steps, step }: { steps: readonly StepId[]; step: StepId }) {
  return (
    <ol class="wizard-steps" aria-label="Steps">
      {steps.map((s, at) => (
        <li key={s} aria-current={s === step ? 'step' : undefined}>
          {at + 1}. {STEP_TITLES[s]}
        </li>
      ))}
    </ol>
  );
}

/** The current step's fields (the review step: the request body). */
function StepBody({
  step,
  props,
  projects,
  body,
  unplaced,
}: {
  step: StepId;
  props: StepProps;
  projects: ReadonlyArray<{ id: string; name: string }> | undefined;
  body: unknown;
  unplaced: Unplaced;
}) {
  return (
    <>
      {step === 'start' && <StartStep {...props} projects={projects} />}
      {step === 'source' && <SourceStep {...props} />}
      {step === 'method' && <MethodStep {...props} />}
      {step === 'method-fields' && <MethodFieldsStep {...props} />}
      {step === 'config' && <ConfigStep {...props} />}
      {step === 'tags' && <TagsStep {...props} />}
      {step === 'review' && <Review body={body} unplaced={unplaced} />}
    </>
  );
}

/**
 * Back (from the second step on), then Next (submits the form; disabled while the step's fields
 * are incomplete) or, on the review step, Create build.
 */
function WizardNav({
  onBack,
  review,
  sending,
  blocked,
}: {
  onBack: (() => void) | undefined;
  review: boolean;
  sending: boolean;
  blocked: boolean;
}) {
  return (
    <div class="wizard-nav">
      {onBack !== undefined && (
        <button type="button" class="secondary" onClick={() => onBack()}>
          Back
        </button>
      )}
      {review ? (
        <button type="submit" disabled={sending}>
          {sending ? 'Creating…' : 'Create build'}
        </button>
      ) : (
        <button type="submit" disabled={blocked} aria-describedby="wizard-blocked">
          Next
        </button>
      )}
      <span id="wizard-blocked" class="muted">
        {blocked ? 'Complete the fields marked above to go on.' : ''}
      </span>
    </div>
  );
}

/** The exact JSON "Create build" sends, and what the server refused that no field shows. */
function Review({ body, unplaced }: { body: unknown; unplaced: Unplaced }) {
  return (
    <>
      {unplaced.length > 0 && (
        <div class="error-summary" role="alert">
          <p>The server refused the build:</p>
          <ul>
            {unplaced.map(([key, message]) => (
              <li key={key}>
                <code>{key}</code>: {message}
              </li>
            ))}
          </ul>
        </div>
      )}
      <p id="review-body-label">This request body is sent to POST /api/v1/builds:</p>
      <pre class="review-body" tabIndex={0} aria-labelledby="review-body-label">
        {JSON.stringify(body, null, 2)}
      </pre>
    </>
  );
}
