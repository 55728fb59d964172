/** The HMAC secret as text (what LogSink masks). */
export const JWT_SECRET = Symbol('JWT_SECRET');
/**
 * The same secret as a `KeyObject`, built once. jsonwebtoken, handed a string or Buffer, first
 * tries to parse it as a PEM public key on every verify (`createPublicKey`, which throws for an
 * HMAC secret): ~0.6 ms a token, twice a request (the rate-limit middleware and the guard).
 */
export const JWT_KEY = Symbol('JWT_KEY');
export const JWT_ALGORITHM = 'HS256';
/** Clock skew tolerated on exp/nbf (RFC 7519 4.1.4 allows "some small leeway"). */
export const JWT_CLOCK_TOLERANCE_SECONDS = 60;
