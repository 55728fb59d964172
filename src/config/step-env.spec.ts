import { loadStepEnv } from './step-env.js';

describe(loadStepEnv.name, () => {
  it('keeps the KILN_* settings and the S3 credentials a step reads, and nothing else', () => {
    expect(
      loadStepEnv({
        KILN_UPLOAD_URL: 'http://kiln.kiln.svc',
        KILN_UPLOAD_TOKEN_SBOM: 't',
        KILN_S3_BUCKET: 'b',
        AWS_ACCESS_KEY_ID: 'id',
        AWS_SECRET_ACCESS_KEY: 'secret',
        AWS_SESSION_TOKEN: 'not read by a step',
        PATH: '/usr/bin',
        HOME: '/root',
        DATABASE_URL: 'postgres://kiln:pw@db/kiln',
        kiln_lower: 'x',
      }),
    ).toEqual({
      KILN_UPLOAD_URL: 'http://kiln.kiln.svc',
      KILN_UPLOAD_TOKEN_SBOM: 't',
      KILN_S3_BUCKET: 'b',
      AWS_ACCESS_KEY_ID: 'id',
      AWS_SECRET_ACCESS_KEY: 'secret',
    });
  });
});
