import { patterns, triggerCreate, triggerForm } from './trigger-form.js';

describe('patterns', () => {
  it('splits patterns typed with spaces, commas or both, dropping the empty ones', () => {
    expect(patterns(' main, release/*  hotfix/** ,')).toEqual(['main', 'release/*', 'hotfix/**']);
  });
});

describe('triggerCreate', () => {
  const form = {
    ...triggerForm(),
    name: ' main-pushes ',
    branches: 'main release/*',
    concurrency: 'latest-only' as const,
  };

  it('sends the name trimmed, the provider, events, branches and concurrency chosen', () => {
    expect(triggerCreate(form)).toEqual({
      body: {
        name: 'main-pushes',
        provider: 'github',
        events: ['push'],
        branches: ['main', 'release/*'],
        concurrency: 'latest-only',
      },
    });
  });

  it("leaves the branches out when none is typed, for the API's default (every branch)", () => {
    expect(triggerCreate({ ...form, branches: '  ' })).toEqual({
      body: expect.not.objectContaining({ branches: expect.anything() }),
    });
  });

  it('names a missing name and a trigger without events under the API’s field names', () => {
    expect(triggerCreate({ ...form, name: ' ', events: [] })).toEqual({
      problems: {
        name: expect.stringMatching(/name/),
        events: 'Choose at least one event',
      },
    });
  });
});
