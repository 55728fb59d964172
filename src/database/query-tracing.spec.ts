import { operationOf } from './query-tracing.js';

describe(operationOf.name, () => {
  it.each([
    ['SELECT * FROM builds WHERE id = $1', 'SELECT'],
    ['  insert into builds (id) values ($1)', 'INSERT'],
    ['\n\tWITH next AS (SELECT 1) UPDATE builds SET x = 1', 'WITH'],
    ['-- why\nDELETE FROM build_log_lines WHERE build_id = $1', 'DELETE'],
    ['/* a note */ START TRANSACTION', 'START'],
    ["'secret' || $1", 'QUERY'],
    ['', 'QUERY'],
  ])('names %j by its first keyword: %s', (text, operation) => {
    expect(operationOf(text)).toBe(operation);
  });
});
