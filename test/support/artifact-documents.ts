/** A small SPDX 2.3 document as syft writes one: one package. */
export const SPDX = {
  spdxVersion: 'SPDX-2.3',
  dataLicense: 'CC0-1.0',
  SPDXID: 'SPDXRef-DOCUMENT',
  name: 'registry.example.com/team/app',
  documentNamespace: 'https://anchore.com/syft/image/app-1',
  creationInfo: { created: '2026-11-23T10:00:00Z', creators: ['Tool: syft-1.18.1'] },
  packages: [
    {
      name: 'openssl',
      SPDXID: 'SPDXRef-Package-openssl',
      versionInfo: '3.0.13-r0',
      downloadLocation: 'NOASSERTION',
    },
  ],
};
