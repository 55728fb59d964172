import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readSbom } from './sbom-document.js';
import { SBOM_COMMANDS } from '../manifest/tool-commands.js';
import { IMAGE_PLACEHOLDER, OUTPUT_PLACEHOLDER } from '../manifest/tool-commands.js';

function fixture(name: string): string {
  return readFileSync(join(__dirname, 'fixtures', name), 'utf8');
}

/** The fixture each SBOM tool wrote, as SBOM_COMMANDS runs it. */
const WRITTEN_BY: Record<keyof typeof SBOM_COMMANDS, string> = {
  syft: 'sbom-syft.spdx.json',
  trivy: 'sbom-trivy.cdx.json',
  grype: 'sbom-grype.cdx.json',
};

describe(readSbom.name, () => {
  it.each([
    ['sbom-syft.spdx.json', { format: 'spdx-json', specVersion: '2.3', packages: 3 }],
    ['sbom-trivy.cdx.json', { format: 'cyclonedx-json', specVersion: '1.4', packages: 4 }],
    ['sbom-grype.cdx.json', { format: 'cyclonedx-json', specVersion: '1.6', packages: 2 }],
  ] as const)('reads %s', (file, expected) => {
    expect(readSbom(fixture(file))).toEqual(expected);
  });

  it.each(Object.entries(WRITTEN_BY))(
    'recognises what the %s command writes as the format SBOM_COMMANDS declares',
    (tool, file) => {
      expect(readSbom(fixture(file))).toMatchObject({
        format: SBOM_COMMANDS[tool as keyof typeof SBOM_COMMANDS].format,
      });
    },
  );

  it('counts absent package and component lists as 0', () => {
    expect(readSbom('{"spdxVersion": "SPDX-2.2", "SPDXID": "SPDXRef-DOCUMENT"}')).toEqual({
      format: 'spdx-json',
      specVersion: '2.2',
      packages: 0,
    });
    expect(readSbom('{"bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1}')).toEqual({
      format: 'cyclonedx-json',
      specVersion: '1.5',
      packages: 0,
    });
  });

  it.each([
    ['an empty upload', '', 'the SBOM is empty'],
    ['blank text', ' \n\t', 'the SBOM is empty'],
    [
      'CycloneDX XML',
      '<?xml version="1.0" encoding="UTF-8"?>\n<bom xmlns="http://cyclonedx.org/schema/bom/1.2" version="1"></bom>',
      'this is XML',
    ],
    [
      'SPDX tag-value',
      'SPDXVersion: SPDX-2.3\nDataLicense: CC0-1.0\nSPDXID: SPDXRef-DOCUMENT\n',
      'this is SPDX tag-value',
    ],
    ['truncated JSON', fixture('sbom-syft.spdx.json').slice(0, 200), 'not JSON: '],
    ['a JSON list', '[]', 'must be a JSON object'],
    ['a JSON string', '"spdx"', 'must be a JSON object'],
    ['SPDX 3 JSON-LD', fixture('sbom-syft.spdx3.json'), 'this is SPDX 3 (JSON-LD)'],
    [
      "syft's own JSON",
      '{"artifacts": [], "artifactRelationships": [], "schema": {"version": "16.0.0", "url": "https://raw.githubusercontent.com/anchore/syft/main/schema/json/schema-16.0.0.json"}}',
      "this is syft's own JSON",
    ],
    ['an unrelated object', '{"matches": []}', 'neither SPDX JSON'],
    [
      'SPDX 1.2',
      '{"spdxVersion": "SPDX-1.2", "packages": []}',
      'spdxVersion "SPDX-1.2" is not SPDX 2.x',
    ],
    ['a numeric spdxVersion', '{"spdxVersion": 2.3}', 'spdxVersion 2.3 is not SPDX 2.x'],
    [
      'SPDX packages that are not a list',
      '{"spdxVersion": "SPDX-2.3", "packages": {}}',
      'packages must be an array',
    ],
    [
      'another bomFormat',
      '{"bomFormat": "SPDX", "specVersion": "1.4"}',
      'bomFormat "SPDX" is not "CycloneDX"',
    ],
    [
      'CycloneDX without specVersion',
      '{"bomFormat": "CycloneDX"}',
      'specVersion (missing) is not a CycloneDX 1.x',
    ],
    [
      'CycloneDX 2.0',
      '{"bomFormat": "CycloneDX", "specVersion": "2.0"}',
      'specVersion "2.0" is not a CycloneDX 1.x',
    ],
    [
      'CycloneDX components that are not a list',
      '{"bomFormat": "CycloneDX", "specVersion": "1.6", "components": {"name": "musl"}}',
      'components must be an array',
    ],
  ] as const)('refuses %s', (_label, text, problem) => {
    const result = readSbom(text);
    expect(result).toEqual({ problem: expect.stringContaining(problem) });
  });
});

describe('SBOM_COMMANDS', () => {
  it.each(Object.entries(SBOM_COMMANDS))(
    '%s takes the image as the end of one argument and writes one output file',
    (_tool, command) => {
      const withImage = command.argv.filter((arg) => arg.includes(IMAGE_PLACEHOLDER));
      expect(withImage).toHaveLength(1);
      expect(withImage[0]?.endsWith(IMAGE_PLACEHOLDER)).toBe(true);
      expect(command.argv.filter((arg) => arg.includes(OUTPUT_PLACEHOLDER))).toHaveLength(1);
      expect(command.stdout).toBe(false);
    },
  );
});
