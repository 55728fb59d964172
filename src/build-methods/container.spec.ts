import { containerfileFor } from './container.js';

describe(containerfileFor.name, () => {
  it('starts from the base image, declares build-time variables, then the instructions in order', () => {
    expect(
      containerfileFor('docker.io/library/alpine:3.20', ['RUN echo $GREETING', 'CMD ["sh"]'], {
        GREETING: 'hi there',
      }),
    ).toBe(
      'FROM docker.io/library/alpine:3.20\nARG GREETING="hi there"\nRUN echo $GREETING\nCMD ["sh"]\n',
    );
  });

  it('quotes variable values so they cannot add instructions', () => {
    expect(containerfileFor('scratch', [], { X: 'a"\nRUN evil' })).toBe(
      'FROM scratch\nARG X="a\\"\\nRUN evil"\n',
    );
  });
});
