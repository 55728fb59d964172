import {
  grantable,
  parseSettings,
  placeDetails,
  projectChange,
  projectCreate,
  projectForm,
  settingsProblem,
  tokenRequest,
} from './forms.js';

describe('grantable', () => {
  it('offers an admin every permission but token:manage', () => {
    expect(
      grantable([
        'build:create',
        'build:list',
        'build:read',
        'build:delete',
        'build:cancel',
        'member:manage',
        'project:manage',
        'settings:manage',
        'token:manage',
      ]),
    ).toEqual([
      'build:list',
      'build:read',
      'build:create',
      'build:cancel',
      'build:delete',
      'member:manage',
      'project:manage',
      'settings:manage',
    ]);
  });

  it("offers a viewer only its role's permissions, in the form's order", () => {
    expect(grantable(['token:manage', 'build:read', 'build:list'])).toEqual([
      'build:list',
      'build:read',
    ]);
  });

  it('leaves out a permission it does not know', () => {
    expect(grantable(['build:list', 'system:admin', 'tenant:list'])).toEqual(['build:list']);
  });
});

describe('tokenRequest', () => {
  const form = { name: ' ci ', permissions: ['build:list' as const], days: '7' };

  it('sends the name trimmed, the permissions chosen and the days as a number', () => {
    expect(tokenRequest(form)).toEqual({
      body: { name: 'ci', permissions: ['build:list'], expires_in_days: 7 },
    });
  });

  it("leaves the days out when empty, for the API's default", () => {
    expect(tokenRequest({ ...form, days: ' ' })).toEqual({
      body: { name: 'ci', permissions: ['build:list'] },
    });
  });

  it("names every problem under the API's field names", () => {
    expect(tokenRequest({ name: '  ', permissions: [], days: '1.5' })).toEqual({
      problems: {
        name: expect.stringContaining('name'),
        permissions: 'Choose at least one permission',
        expires_in_days: 'A whole number of days, 1 or more',
      },
    });
  });

  it('refuses zero, negative and non-decimal days, and a name over 100 characters', () => {
    for (const days of ['0', '-3', '1e3', '0x10', 'thirty']) {
      expect(tokenRequest({ ...form, days })).toEqual({
        problems: { expires_in_days: expect.any(String) },
      });
    }
    expect(tokenRequest({ ...form, name: 'x'.repeat(101) })).toEqual({
      problems: { name: 'At most 100 characters' },
    });
  });
});

describe('parseSettings', () => {
  it('reads a JSON object', () => {
    expect(parseSettings('{ "region": "eu-west-1", "auth": { "method": "token" } }')).toEqual({
      settings: { region: 'eu-west-1', auth: { method: 'token' } },
    });
  });

  it('says what is wrong with text that is not JSON', () => {
    expect(parseSettings('{ region: eu-west-1 }')).toEqual({
      problem: expect.stringMatching(/^Not valid JSON: /),
    });
  });

  it('refuses JSON that is not an object', () => {
    for (const text of ['null', '[]', '"vault"', '42']) {
      expect(parseSettings(text)).toEqual({ problem: expect.stringContaining('JSON object') });
    }
  });
});

describe('settingsProblem', () => {
  it("names each field relative to the settings object, in the API's order", () => {
    expect(
      settingsProblem({
        'settings.auth.tokenFile': 'must be an absolute file path',
        'settings.region': 'is required',
      }),
    ).toBe('auth.tokenFile: must be an absolute file path; region: is required');
  });

  it('gives a problem with the whole object as its message alone', () => {
    expect(settingsProblem({ settings: 'must be a JSON object' })).toBe('must be a JSON object');
  });

  it('is undefined without details', () => {
    expect(settingsProblem({})).toBeUndefined();
  });
});

describe('placeDetails', () => {
  it("puts a form's fields (and their sub-fields) on them and lists the rest", () => {
    expect(
      placeDetails(
        {
          name: 'length 1-100',
          'permissions.0': 'must be one of …',
          'permissions.1': 'must be one of …, again',
          tenant_id: 'unexpected',
        },
        ['name', 'permissions'],
      ),
    ).toEqual({
      placed: { name: 'length 1-100', permissions: 'must be one of …' },
      rest: ['tenant_id: unexpected'],
    });
  });

  it('does not take a field whose name only starts like one of the form', () => {
    expect(placeDetails({ names: 'x' }, ['name'])).toEqual({ placed: {}, rest: ['names: x'] });
  });
});

describe('projectCreate', () => {
  it('trims the values and leaves empty optional fields out', () => {
    expect(
      projectCreate({ name: ' web ', git_repository_url: '  ', default_registry: ' r.io/team ' }),
    ).toEqual({ name: 'web', default_registry: 'r.io/team' });
  });
});

describe('projectChange', () => {
  const project = {
    name: 'web',
    git_repository_url: 'https://git.example.com/a/web.git',
    default_registry: null,
  };

  it('sends nothing for a form left as the project is', () => {
    expect(projectChange(project, projectForm(project))).toEqual({});
  });

  it('sends only what changed, trimmed', () => {
    expect(
      projectChange(project, { ...projectForm(project), name: ' api ', default_registry: 'r.io' }),
    ).toEqual({ name: 'api', default_registry: 'r.io' });
  });

  it('removes an emptied repository with null', () => {
    expect(projectChange(project, { ...projectForm(project), git_repository_url: ' ' })).toEqual({
      git_repository_url: null,
    });
  });

  it('treats a registry the API left out as none', () => {
    const without = { name: project.name, git_repository_url: project.git_repository_url };
    expect(projectChange(without, projectForm(without))).toEqual({});
  });
});
