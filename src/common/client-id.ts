/**
 * An id a client may supply that the router keeps as it is: the session id (contract §4) and the
 * `X-Request-Id`. 1 to 128 characters from `A-Za-z0-9._:-`, so it is safe in a response header and
 * a log line as it stands.
 */
export const CLIENT_ID = /^[A-Za-z0-9._:-]{1,128}$/;
