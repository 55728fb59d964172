import { ErrorCode } from './errors.js';
import { isDatabaseUnavailable, translateDatabaseError } from './database-errors.js';

describe(translateDatabaseError.name, () => {
  it('maps a unique violation to Conflict, also when TypeORM wraps it', () => {
    expect(translateDatabaseError({ code: '23505', message: 'duplicate key' })?.code).toBe(
      ErrorCode.Conflict,
    );
    expect(
      translateDatabaseError({ message: 'QueryFailedError', driverError: { code: '23505' } })?.code,
    ).toBe(ErrorCode.Conflict);
  });

  it.each([
    [
      'refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    ],
    [
      'admin shutdown',
      { code: '57P01', message: 'terminating connection due to administrator command' },
    ],
    ['cannot connect now', { code: '57P03', message: 'the database system is starting up' }],
    ['connection failure class', { code: '08006', message: 'connection failure' }],
    ['terminated client', new Error('Connection terminated unexpectedly')],
    ['pool timeout', new Error('timeout exceeded when trying to connect')],
    [
      'aggregate of refusals',
      new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })]),
    ],
  ])('maps %s to Unavailable', (_name, error) => {
    expect(translateDatabaseError(error)?.code).toBe(ErrorCode.Unavailable);
  });

  it('leaves other errors alone', () => {
    expect(translateDatabaseError(new Error('boom'))).toBeUndefined();
    expect(
      translateDatabaseError({ code: '42P01', message: 'relation does not exist' }),
    ).toBeUndefined();
    expect(translateDatabaseError('text')).toBeUndefined();
  });
});

describe(isDatabaseUnavailable.name, () => {
  it.each([
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    ],
    [
      'a crash shutdown wrapped by TypeORM',
      { message: 'QueryFailedError', driverError: { code: '57P02' } },
    ],
    [
      'a connection dropped under a wrapper',
      new Error('append failed', { cause: new Error('Connection terminated unexpectedly') }),
    ],
  ])('is true for %s', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['a unique violation', { code: '23505', message: 'duplicate key' }],
    ['a missing relation', { code: '42P01', message: 'relation does not exist' }],
    ['a plain error', new Error('Build not found')],
    ['undefined', undefined],
  ])('is false for %s', (_name, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });
});
