import {
  entryProblems,
  isJsonTemplate,
  readHclTemplate,
  readJsonTemplate,
  type TemplateDeclarations,
  type TemplateEntries,
  type TemplateRead,
} from './packer-template.js';

const JSON_TEMPLATE = JSON.stringify({
  variables: { region: 'eu-west-1' },
  builders: [
    { type: 'amazon-ebs', region: '{{user `region`}}' },
    { type: 'amazon-ebs', name: 'second', region: 'us-east-1' },
    { type: 'googlecompute', project_id: 'p' },
  ],
  provisioners: [
    { type: 'shell', inline: ['apt-get update'] },
    { type: 'file', source: 'a', destination: '/b' },
  ],
  'post-processors': [
    'compress',
    { type: 'manifest', output: 'm.json' },
    ['checksum', { type: 'shell-local', inline: ['true'] }],
  ],
});

const HCL_TEMPLATE = `
packer {
  required_plugins {
    amazon = {
      version = ">= 1.3"
      source  = "github.com/hashicorp/amazon"
    }
  }
}

variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "ami_name" {}

locals {
  stamp = regex_replace(timestamp(), "[- TZ:]", "")
}

source "amazon-ebs" "ubuntu" {
  region   = var.region
  ami_name = "\${var.ami_name}-\${local.stamp}"
}

source "amazon-ebs" "debian" {
  region = var.region
}

source "googlecompute" "base" {
  project_id = "p"
}

build {
  name    = "first"
  sources = ["source.amazon-ebs.ubuntu", "source.googlecompute.base"]

  provisioner "shell" {
    inline = ["echo first"]
  }

  post-processor "manifest" {}
}

build {
  sources = ["source.amazon-ebs.debian"]

  provisioner "ansible" {
    playbook_file = "site.yml"
  }

  post-processors {
    post-processor "compress" {}
    post-processor "checksum" {
      checksum_types = ["sha256"]
    }
  }
}
`;

function declarationsOf(read: TemplateRead): TemplateDeclarations {
  if (!read.ok) throw new Error(`template refused: ${read.problem}`);
  return read.declarations;
}

describe(isJsonTemplate.name, () => {
  it.each<[string, boolean]>([
    ['{"builders":[]}', true],
    ['  \n {', true],
    ['source "null" "x" {}', false],
    ['# {"builders":[]}', false],
    ['["builders"]', false],
  ])('%j → %s', (text, json) => {
    expect(isJsonTemplate(text)).toBe(json);
  });
});

describe(readJsonTemplate.name, () => {
  it('reads the builders (named or by type), provisioners and post-processors at any depth', () => {
    expect(declarationsOf(readJsonTemplate(JSON_TEMPLATE))).toEqual({
      syntax: 'json',
      builders: [
        { type: 'amazon-ebs', name: 'amazon-ebs' },
        { type: 'amazon-ebs', name: 'second' },
        { type: 'googlecompute', name: 'googlecompute' },
      ],
      provisioners: ['file', 'shell'],
      postProcessors: ['checksum', 'compress', 'manifest', 'shell-local'],
    });
  });

  it('reads a template with builders only', () => {
    expect(declarationsOf(readJsonTemplate('{"builders":[{"type":"null"}]}'))).toEqual({
      syntax: 'json',
      builders: [{ type: 'null', name: 'null' }],
      provisioners: [],
      postProcessors: [],
    });
  });

  it("refuses text that starts like JSON with JSON.parse's own message", () => {
    const read = readJsonTemplate('{"builders": [');

    expect(!read.ok && read.problem).toMatch(/^is not valid JSON: /);
  });

  it("refuses text that is not JSON, with the parser's message and the line and column", () => {
    const read = readJsonTemplate('{\n  "builders": [\n    {"type": "null",}\n  ]\n}');

    expect(read.ok).toBe(false);
    expect(!read.ok && read.problem).toMatch(/^is not valid JSON: .+line 3 column 21/);
  });

  it.each<[string, string, string]>([
    ['an array', '[{"type":"null"}]', 'a JSON template must be an object'],
    ['an object without builders', '{"provisioners":[]}', 'needs a "builders" array'],
    [
      'HCL2 in JSON syntax',
      JSON.stringify({ source: { null: { x: {} } }, build: { sources: ['source.null.x'] } }),
      'HCL2 in JSON syntax is not supported',
    ],
  ])('refuses %s', (_name, text, problem) => {
    const read = readJsonTemplate(text);

    expect(read.ok).toBe(false);
    expect(!read.ok && read.problem).toContain(problem);
  });
});

describe(readHclTemplate.name, () => {
  it('reads the sources of a template with variables, locals, several sources and builds', async () => {
    expect(declarationsOf(await readHclTemplate(HCL_TEMPLATE))).toEqual({
      syntax: 'hcl2',
      builders: [
        { type: 'amazon-ebs', name: 'debian' },
        { type: 'amazon-ebs', name: 'ubuntu' },
        { type: 'googlecompute', name: 'base' },
      ],
      provisioners: ['ansible', 'shell'],
      postProcessors: ['checksum', 'compress', 'manifest'],
    });
  });

  it('reads a template without builds: sources only', async () => {
    expect(declarationsOf(await readHclTemplate('source "null" "x" {\n}\n'))).toEqual({
      syntax: 'hcl2',
      builders: [{ type: 'null', name: 'x' }],
      provisioners: [],
      postProcessors: [],
    });
  });

  it('keeps the type of a source block that lacks its name label', async () => {
    expect(declarationsOf(await readHclTemplate('source "amazon-ebs" {\n}\n')).builders).toEqual([
      { type: 'amazon-ebs', name: undefined },
    ]);
  });

  it.each<[string, string, RegExp]>([
    [
      'an expression missing its value',
      'source "null" "x" {\n  communicator =\n}\n',
      /^is neither JSON nor valid HCL2: template\.pkr\.hcl:2,\d+-\d+,\d+: Invalid expression/,
    ],
    [
      'an unclosed block',
      'build {\n  provisioner "shell" {\n',
      /^is neither JSON nor valid HCL2: template\.pkr\.hcl:\d+,\d+/,
    ],
    [
      'a YAML document',
      'builders:\n  - type: null\n',
      /^is neither JSON nor valid HCL2: template\.pkr\.hcl:1,\d+/,
    ],
  ])('refuses %s with the line and column', async (_name, text, problem) => {
    const read = await readHclTemplate(text);

    expect(read.ok).toBe(false);
    expect(!read.ok && read.problem).toMatch(problem);
  });

  it('answers NUL and lone surrogates without breaking the parser for the next template', async () => {
    const reads = await Promise.all(
      ['source "null" "x" {\u0000}', '\udfff', 'source "\ud800" "x" {}'].map(readHclTemplate),
    );

    expect(reads.map((read) => read.ok)).toEqual([false, false, true]);
    expect(declarationsOf(await readHclTemplate('source "null" "after" {\n}\n')).builders).toEqual([
      { type: 'null', name: 'after' },
    ]);
  });

  it('gives each of several parses at once its own answer', async () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];

    const reads = await Promise.all(
      names.map((name) => readHclTemplate(`source "null" "${name}" {\n}\n`)),
    );

    expect(reads.map((read) => declarationsOf(read).builders[0]?.name)).toEqual(names);
  });
});

describe(entryProblems.name, () => {
  describe('against a JSON template', () => {
    const declarations = declarationsOf(readJsonTemplate(JSON_TEMPLATE));

    it.each<[string, TemplateEntries]>([
      ['nothing sent', {}],
      ['empty lists', { builders: [], provisioners: [], post_processors: [] }],
      [
        'builders by type, by type and name, and as strings',
        {
          builders: [
            { type: 'amazon-ebs', region: 'eu-west-1' },
            { type: 'amazon-ebs', name: 'second' },
            { type: 'amazon-ebs', name: 'amazon-ebs' },
            'googlecompute',
          ],
        },
      ],
      [
        'provisioners as objects and strings',
        { provisioners: [{ type: 'shell', inline: ['x'] }, 'file'] },
      ],
      [
        'post-processors as strings, objects and chains',
        { post_processors: ['compress', { type: 'manifest' }, ['checksum', { type: 'compress' }]] },
      ],
    ])('accepts %s', (_name, entries) => {
      expect(entryProblems(declarations, entries)).toEqual({});
    });

    it('names each field whose entries the template does not declare, and what it does declare', () => {
      expect(
        entryProblems(declarations, {
          builders: [{ type: 'amazon-ebs' }, { type: 'docker' }, { type: 'amazon-ebs', name: 'x' }],
          provisioners: [{ inline: ['x'] }, 'ansible'],
          post_processors: ['manifest', ['checksum', 'docker-push']],
        }),
      ).toEqual({
        'manifest.build_config.builders':
          'entry 1: no builder of type "docker"; entry 2: no builder "amazon-ebs" named "x" (the template declares amazon-ebs, amazon-ebs "second", googlecompute)',
        'manifest.build_config.provisioners':
          'entry 0 has no type; entry 1: no provisioner of type "ansible" (the template declares file, shell)',
        'manifest.build_config.post_processors':
          'entry 1.1: no post-processor of type "docker-push" (the template declares checksum, compress, manifest, shell-local)',
      });
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['a number', 3],
      ['an empty string', ''],
      ['an object with an empty type', { type: '' }],
      ['an object with a numeric type', { type: 1 }],
    ])('refuses a builder entry that is %s: it has no type', (_name, entry) => {
      expect(entryProblems(declarations, { builders: [entry] })).toEqual({
        'manifest.build_config.builders': expect.stringMatching(/^entry 0 has no type \(/),
      });
    });
  });

  describe('against an HCL2 template', () => {
    let declarations: TemplateDeclarations;
    beforeAll(async () => {
      declarations = declarationsOf(await readHclTemplate(HCL_TEMPLATE));
    });

    it('accepts sources by type, by type and name, and by their reference', () => {
      expect(
        entryProblems(declarations, {
          builders: [
            { type: 'amazon-ebs' },
            { type: 'amazon-ebs', name: 'debian' },
            'source.googlecompute.base',
            'googlecompute',
          ],
          provisioners: [{ type: 'ansible' }, { type: 'shell' }],
          post_processors: [{ type: 'manifest' }, ['compress', 'checksum']],
        }),
      ).toEqual({});
    });

    it('refuses a source name, a provisioner or a post-processor the template does not declare', () => {
      expect(
        entryProblems(declarations, {
          builders: [{ type: 'amazon-ebs', name: 'centos' }, 'source.googlecompute.ubuntu'],
          provisioners: ['powershell'],
          post_processors: [{ type: 'vagrant' }],
        }),
      ).toEqual({
        'manifest.build_config.builders':
          'entry 0: no builder "amazon-ebs" named "centos"; entry 1: no builder "googlecompute" named "ubuntu" (the template declares source.amazon-ebs.debian, source.amazon-ebs.ubuntu, source.googlecompute.base)',
        'manifest.build_config.provisioners':
          'entry 0: no provisioner of type "powershell" (the template declares ansible, shell)',
        'manifest.build_config.post_processors':
          'entry 0: no post-processor of type "vagrant" (the template declares checksum, compress, manifest)',
      });
    });

    it('says so when the template declares none of a kind', async () => {
      const bare = declarationsOf(await readHclTemplate('source "null" "x" {\n}\n'));

      expect(entryProblems(bare, { provisioners: ['shell'] })).toEqual({
        'manifest.build_config.provisioners':
          'entry 0: no provisioner of type "shell" (the template declares none)',
      });
    });
  });
});
