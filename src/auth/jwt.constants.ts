export const JWT_SECRET = Symbol('JWT_SECRET');
export const JWT_ALGORITHM = 'HS256';
/** Clock skew tolerated on exp/nbf (RFC 7519 4.1.4 allows "some small leeway"). */
export const JWT_CLOCK_TOLERANCE_SECONDS = 60;
